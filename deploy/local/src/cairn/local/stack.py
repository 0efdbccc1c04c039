"""The whole local stack: servers, migrations, the five services, the demo tenant, endpoints.env."""

import json
import os
import secrets
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import quote

import httpx

from cairn.delivery.nats_logins import issuer_public_key, new_issuer_seed
from cairn.local.infra import LOGINS_PERMISSIONS, SERVICE_PERMISSIONS, NatsUser, Postgres, start_nats, start_redis
from cairn.local.processes import free_port, is_running, port_is_free, spawn, stop_all, stop_pid, wait_for_ready

SERVICES = ("ingest", "session", "indexer", "recall", "consolidation")
DATABASE = "cairn"
OWNER = "cairn_owner"  # owns the schema and runs migrations; not a superuser
# Ports held by another process than the one of their own name.
_PROCESS_OF = {"nats_monitor": "nats"}
# The longest path a Unix-domain socket may have (sun_path, NUL included, on Linux).
MAX_SOCKET_PATH = 107
# The operator's NATS user (`cairn migrate`, the CLI, tests); each service logs in as `cairn-<service>`.
NATS_OPERATOR = "cairn-operator"
NATS_LOGINS = "cairn-logins"  # answers adapters' logins (ingest's adapter_logins.py)
SERVICE_ROLE = "cairn_app"  # cairn_projector logs in with the same password (see `cairn migrate`)


@dataclass
class StackState:
    """What `up` started, kept in `<home>/stack.json` so `down` stops exactly these PIDs."""

    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    admin_token: str = ""
    api_key: str = ""
    tenant_id: str = ""
    # Every server login's password (Postgres roles, Redis, NATS users), made at the first `up`; this file is 0600 and
    # nothing prints them.
    passwords: dict[str, str] = field(default_factory=dict)

    def password(self, login: str) -> str:
        if login not in self.passwords:
            self.passwords[login] = secrets.token_urlsafe(24)
        return self.passwords[login]

    @classmethod
    def load(cls, path: Path) -> "StackState":
        return cls(**json.loads(path.read_text())) if path.exists() else cls()

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2))
        path.chmod(0o600)


class LocalStack:
    def __init__(
        self,
        home: Path,
        durable: bool = True,
        extra_env: dict[str, str] | None = None,
        postgres_over: Literal["unix", "tcp"] = "unix",
    ) -> None:
        self.home = home.resolve()
        self.home.mkdir(parents=True, exist_ok=True)
        self.home.chmod(0o755)
        self.state_file = self.home / "stack.json"
        self.state = StackState.load(self.state_file)
        self.postgres = Postgres(self.home, durable=durable, password=self.state.password("postgres"))
        self.extra_env = extra_env or {}
        self.postgres_over = postgres_over

    # -- urls ------------------------------------------------------------------------------------
    def url(self, service: str) -> str:
        return f"http://127.0.0.1:{self.state.ports[service]}"

    @property
    def nats_url(self) -> str:
        """As the operator's user: every subject (the CLI, migrations, tests)."""
        return self.nats_url_as(NATS_OPERATOR)

    def nats_url_as(self, user: str) -> str:
        return f"nats://{user}:{self.state.password('nats:' + user)}@127.0.0.1:{self.state.ports['nats']}"

    def nats_users(self) -> list[NatsUser]:
        users = [NatsUser(NATS_OPERATOR, self.state.password("nats:" + NATS_OPERATOR))]
        for service in SERVICES:
            user = f"cairn-{service}"
            users.append(NatsUser(user, self.state.password("nats:" + user), SERVICE_PERMISSIONS))
        users.append(NatsUser(NATS_LOGINS, self.state.password("nats:" + NATS_LOGINS), LOGINS_PERMISSIONS))
        return users

    def nats_issuer_seed(self) -> str:
        """The account key nats-server trusts for ingest's answers to adapters' logins."""
        if "nats-issuer" not in self.state.passwords:
            self.state.passwords["nats-issuer"] = new_issuer_seed()
        return self.state.passwords["nats-issuer"]

    @property
    def nats_monitor_url(self) -> str:
        """NATS's monitoring endpoint (`/varz`, `/jsz`), on 127.0.0.1."""
        return f"http://127.0.0.1:{self.state.ports['nats_monitor']}"

    @property
    def redis_url(self) -> str:
        return f"redis://:{self.state.password('redis')}@127.0.0.1:{self.state.ports['redis']}/0"

    def postgres_url(self, user: str = "cairn_app") -> str:
        """Postgres listens on 127.0.0.1 and on a Unix-domain socket in its data folder (`-k`). On one machine the
        socket is the cheaper way (no TCP/IP stack: ~20 % less CPU per round trip on each side), so the services
        (and `bench load`'s raw baseline, which reads the same URL) use it unless asked for TCP or the path is too
        long for a socket; libpq and asyncpg read a host that starts with "/" as the socket's folder."""
        port = self.state.ports["postgres"]
        socket = self.postgres.data / f".s.PGSQL.{port}"
        login = f"{user}:{self.state.password(_postgres_login(user))}"
        if self.postgres_over == "unix" and len(str(socket)) < MAX_SOCKET_PATH:
            return f"postgresql://{login}@{quote(str(self.postgres.data), safe='')}:{port}/{DATABASE}"
        return f"postgresql://{login}@127.0.0.1:{port}/{DATABASE}"

    def database_url(self, database: str, user: str = SERVICE_ROLE) -> str:
        """`postgres_url` for another database of this server (a test's own)."""
        return f"{self.postgres_url(user).rsplit('/', 1)[0]}/{database}"

    # -- lifecycle -------------------------------------------------------------------------------
    def up(self) -> None:
        self._assign_ports()
        self.start_servers()
        self.migrate()
        for service in SERVICES:
            self.start_service(service)
        for service in SERVICES:
            self.wait_ready(service)
        self._ensure_demo_tenant()
        self._write_endpoints()

    def start_servers(self) -> None:
        ports = self.state.ports
        self.state.save(self.state_file)  # the passwords first: a server started with one must not lose it
        if not is_running(self.state.pids.get("nats")):
            self.state.pids["nats"] = start_nats(
                self.home, ports["nats"], ports["nats_monitor"], self.nats_users(),
                issuer_public_key(self.nats_issuer_seed()),
            )  # fmt: skip
        if not is_running(self.state.pids.get("redis")):
            self.state.pids["redis"] = start_redis(self.home, ports["redis"], self.state.password("redis"))
        if not is_running(self.state.pids.get("postgres")):
            self.state.pids["postgres"] = self.postgres.start(ports["postgres"])
        self.postgres.create_database(ports["postgres"], DATABASE, OWNER)
        self.postgres.set_password(ports["postgres"], OWNER, self.state.password(OWNER))
        self.state.save(self.state_file)

    def migrate(self) -> None:
        env = {
            **os.environ,
            "CAIRN_POSTGRES_ADMIN_URL": self.postgres_url(OWNER),
            "CAIRN_POSTGRES_APP_PASSWORD": self.state.password(SERVICE_ROLE),
            "CAIRN_NATS_URL": self.nats_url,
        }
        cli = Path(sys.executable).parent / "cairn"
        subprocess.run([str(cli), "migrate"], check=True, env=env, stdin=subprocess.DEVNULL, capture_output=True)

    def service_env(self, service: str) -> dict[str, str]:
        env = {
            **os.environ,
            "CAIRN_POSTGRES_URL": self.postgres_url(),
            "CAIRN_NATS_URL": self.nats_url_as(f"cairn-{service.split('#')[0]}"),
            "CAIRN_REDIS_URL": self.redis_url,
            "CAIRN_HTTP_HOST": "127.0.0.1",
            "CAIRN_HTTP_PORT": str(self.state.ports[service]),
            "CAIRN_ADMIN_TOKEN": self.state.admin_token,
            "OTEL_SERVICE_NAME": f"cairn-{service.split('#')[0]}",
            "OMP_NUM_THREADS": "1",
            **self.extra_env,
        }
        if service.split("#")[0] == "ingest":  # it answers adapters' NATS logins
            env["CAIRN_NATS_LOGINS_URL"] = self.nats_url_as(NATS_LOGINS)
            env["CAIRN_NATS_ISSUER_SEED"] = self.nats_issuer_seed()
        return env

    def start_service(self, service: str) -> None:
        """Start a service, or one more replica of it when named `<service>#<n>` (see `add_replica`)."""
        if is_running(self.state.pids.get(service)):
            return
        binary = Path(sys.executable).parent / f"cairn-{service.split('#')[0]}"
        log = self.home / "logs" / f"{service.replace('#', '-')}.log"
        self.state.pids[service] = spawn([str(binary)], log, self.service_env(service))
        self.state.save(self.state_file)

    def add_replica(self, service: str) -> str:
        """Name and port for another replica of `service`; start it with `start_service(name)`."""
        name = f"{service}#{sum(1 for n in self.state.ports if n.split('#')[0] == service) + 1}"
        self.state.ports[name] = free_port()
        self.state.save(self.state_file)
        return name

    def wait_ready(self, service: str, timeout: float = 60.0) -> None:
        wait_for_ready(
            f"{self.url(service)}/readyz",
            timeout,
            self.state.pids.get(service),
            self.home / "logs" / f"{service.replace('#', '-')}.log",
        )

    def kill_service(self, service: str) -> None:
        """kill -9, as a crash would: no shutdown hooks run."""
        pid = self.state.pids.get(service)
        if is_running(pid):
            assert pid is not None
            os.kill(pid, 9)
            stop_pid(pid, timeout=5)

    def restart_redis(self) -> None:
        """Stop Redis and start it again on its port: it runs without persistence, so it comes back empty."""
        stop_pid(self.state.pids.pop("redis", None))
        self.state.pids["redis"] = start_redis(self.home, self.state.ports["redis"], self.state.password("redis"))
        self.state.save(self.state_file)

    def stop_postgres(self) -> None:
        """Stop Postgres (a fast shutdown: its sessions are ended), as an outage would; `start_servers` brings it
        back on its port with its data."""
        self.postgres.stop()
        self.state.pids.pop("postgres", None)
        self.state.save(self.state_file)

    def stop_nats(self) -> None:
        """Stop NATS, as an outage would; `start_servers` brings it back on its port with its streams."""
        stop_pid(self.state.pids.pop("nats", None))
        self.state.save(self.state_file)

    def stop_redis(self) -> None:
        """Stop Redis, as an outage would; `start_servers` brings it back on its port, empty."""
        stop_pid(self.state.pids.pop("redis", None))
        self.state.save(self.state_file)

    def down(self) -> None:
        services = [name for name in self.state.pids if name.split("#")[0] in SERVICES]
        stop_all([self.state.pids.pop(name, None) for name in services])
        self.postgres.stop()
        self.state.pids.pop("postgres", None)
        for server in ("redis", "nats"):
            stop_pid(self.state.pids.pop(server, None))
        self.state.save(self.state_file)

    # -- details ---------------------------------------------------------------------------------
    def _assign_ports(self) -> None:
        """Keep the ports of the last run (stable endpoints); pick new ones only when taken."""
        for name in ("nats", "nats_monitor", "postgres", "redis", *SERVICES):
            port = self.state.ports.get(name)
            owned = is_running(self.state.pids.get(_PROCESS_OF.get(name, name)))
            if port is None or not (owned or port_is_free(port)):
                self.state.ports[name] = free_port()
        if not self.state.admin_token:
            self.state.admin_token = "adm_" + secrets.token_urlsafe(24)
        self.state.save(self.state_file)

    def _ensure_demo_tenant(self) -> None:
        if self.state.api_key:
            probe = httpx.post(
                f"{self.url('recall')}/v1/sessions/search",
                json={"query": "probe"},
                headers={"Authorization": f"Bearer {self.state.api_key}"},
                timeout=10,
            )
            if probe.status_code != 401:
                return
        response = httpx.post(
            f"{self.url('ingest')}/v1/admin/tenants",
            json={"name": "demo"},
            headers={"Authorization": f"Bearer {self.state.admin_token}"},
            timeout=10,
        )
        response.raise_for_status()
        body = response.json()
        self.state.api_key, self.state.tenant_id = body["api_key"], body["tenant_id"]
        self.state.save(self.state_file)

    def endpoints(self) -> dict[str, str]:
        """What `endpoints.env` says: where everything is, and the logins (the benches read it)."""
        return {
            "CAIRN_INGEST_URL": self.url("ingest"),
            "CAIRN_RECALL_URL": self.url("recall"),
            "CAIRN_API_KEY": self.state.api_key,
            "CAIRN_ADMIN_TOKEN": self.state.admin_token,
            "CAIRN_TENANT_ID": self.state.tenant_id,
            **{f"CAIRN_{s.upper()}_HEALTH_URL": f"{self.url(s)}/readyz" for s in SERVICES},
            "CAIRN_NATS_URL": self.nats_url,
            "CAIRN_REDIS_URL": self.redis_url,
            "CAIRN_POSTGRES_URL": self.postgres_url(),
            # the operator's logins, for `cairn bench` (it reads past row-level security) and by hand
            "CAIRN_POSTGRES_CAIRN_OWNER_URL": self.postgres_url(OWNER),
            "CAIRN_POSTGRES_POSTGRES_URL": self.postgres_url("postgres"),
        }

    def _write_endpoints(self) -> None:
        path = self.home / "endpoints.env"
        path.write_text("".join(f"{key}={value}\n" for key, value in self.endpoints().items()))
        path.chmod(0o600)


def _postgres_login(user: str) -> str:
    """Whose password a Postgres user logs in with: the projections' role shares the services' password."""
    return SERVICE_ROLE if user == "cairn_projector" else user
