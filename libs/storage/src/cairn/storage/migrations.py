"""Each owner's schema, applied once by an explicit command (`cairn migrate`), never at service start.

An owner (the platform, a service, the memory index) keeps its schema in a `schema/` folder beside its store:
versioned migrations `V<n>__<name>.sql`, applied once each in order and recorded, and repeatable definitions
`R__<name>.sql` (one SQL function, with its grants and triggers, per file), re-applied whenever their text
changes, so the tree holds only the current definition of every function. A repeatable must be re-runnable
(`CREATE OR REPLACE`); a change of a function's arguments or result type needs a versioned migration that drops
the old one, which runs first. Everything runs in one transaction under one advisory lock.
"""

import hashlib
import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import asyncpg

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SchemaOwner:
    name: str
    package: str  # the Python package whose `schema/` folder holds this owner's SQL


# The order every owner's versioned migrations run in, then every owner's repeatables: later owners build on
# earlier ones (the platform's roles and row-level security helpers, ingest's tenants, the indexer's schema and
# its tenant keys, which the memory index's tables use). Moving a folder with its module is a change of `package`.
OWNERS = (
    SchemaOwner("platform", "cairn.platform"),
    SchemaOwner("ingest", "cairn.ingest"),
    SchemaOwner("session", "cairn.session"),
    SchemaOwner("indexer", "cairn.indexer"),
    SchemaOwner("memindex", "cairn.memindex"),
    SchemaOwner("consolidation", "cairn.consolidation"),
    SchemaOwner("recall", "cairn.recall"),
)

CREATE_LEDGER = """
CREATE SCHEMA IF NOT EXISTS cairn;
CREATE TABLE IF NOT EXISTS cairn.schema_versions (
    owner      text        NOT NULL,
    version    int         NOT NULL,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, version)
);
CREATE TABLE IF NOT EXISTS cairn.schema_repeatables (
    owner      text        NOT NULL,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, name)
)
"""
# One migrator at a time, whatever the number of Jobs or replicas that call it.
LOCK = "SELECT pg_advisory_xact_lock(7245019)"
APPLIED_VERSIONS = "SELECT owner, version, checksum FROM cairn.schema_versions"
APPLIED_REPEATABLES = "SELECT owner, name, checksum FROM cairn.schema_repeatables"
RECORD_VERSION = "INSERT INTO cairn.schema_versions (owner, version, name, checksum) VALUES ($1, $2, $3, $4)"
RECORD_REPEATABLE = """
INSERT INTO cairn.schema_repeatables (owner, name, checksum) VALUES ($1, $2, $3)
ON CONFLICT (owner, name) DO UPDATE SET checksum = excluded.checksum, applied_at = now()
"""
UNCHECKED_BODIES = "SET LOCAL check_function_bodies = off"
CHECKED_BODIES = "SET LOCAL check_function_bodies = on"
# The ledger of the numbered chain (libs/platform migrations 0001-0151) that the baselines replaced.
OLD_CHAIN_UNADOPTED = """
SELECT to_regclass('cairn.schema_migrations') IS NOT NULL AND NOT EXISTS (SELECT 1 FROM cairn.schema_versions)
"""
OLD_CHAIN_LAST = "SELECT max(version) FROM cairn.schema_migrations"
OLD_CHAIN_END = 151
# The owners whose baselines are that chain's squash; an owner added since (recall) has its baseline applied.
OLD_CHAIN_OWNERS = frozenset({"platform", "ingest", "session", "indexer", "memindex", "consolidation"})
BASELINE = "V0001__baseline"
# The roles services log in as (projections as cairn_projector), all with the one app password.
SERVICE_ROLES = ("cairn_app", "cairn_projector")


@dataclass(frozen=True)
class SchemaFile:
    owner: str
    kind: Literal["versioned", "repeatable"]
    version: int  # 0 for a repeatable
    name: str  # the file name without `.sql`
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()

    @property
    def label(self) -> str:
        return f"{self.owner}/{self.name}"


class SchemaError(RuntimeError):
    """The database's recorded schema cannot be brought to this release's."""


def schema_folder(owner: SchemaOwner) -> Path:
    """Found without importing the package (a service's package is not this process's to import)."""
    spec = importlib.util.find_spec(owner.package)
    if spec is None or not spec.submodule_search_locations:
        raise SchemaError(f"the schema of {owner.name} lives in the package {owner.package}, which is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "schema"


def owner_files(owner: SchemaOwner) -> list[SchemaFile]:
    """An owner's versioned migrations by version, then its repeatables by name."""
    versioned, repeatable = [], []
    for path in sorted(schema_folder(owner).glob("*.sql")):
        sql = path.read_text("utf-8")
        if path.name.startswith("R__"):
            repeatable.append(SchemaFile(owner.name, "repeatable", 0, path.stem, sql))
        elif path.name.startswith("V") and "__" in path.name:
            version = int(path.name[1:].partition("__")[0])
            versioned.append(SchemaFile(owner.name, "versioned", version, path.stem, sql))
        else:
            raise SchemaError(f"{path} is neither V<n>__<name>.sql nor R__<name>.sql")
    return sorted(versioned, key=lambda f: f.version) + repeatable


def available_schema(owners: tuple[SchemaOwner, ...] = OWNERS) -> list[SchemaFile]:
    """Every file in the order it is applied: all owners' versioned migrations, then all their repeatables."""
    files = [f for owner in owners for f in owner_files(owner)]
    return [f for f in files if f.kind == "versioned"] + [f for f in files if f.kind == "repeatable"]


async def apply_migrations(
    admin_url: str, app_password: str | None = None, owners: tuple[SchemaOwner, ...] = OWNERS
) -> list[str]:
    """Apply every versioned migration not yet recorded and every repeatable whose text changed; returns their
    labels (`<owner>/<file name>`)."""
    files = available_schema(owners)
    conn = await asyncpg.connect(admin_url)
    try:
        async with conn.transaction():
            await conn.execute(LOCK)
            await conn.execute(CREATE_LEDGER)
            await _adopt_old_chain(conn, files)
            applied = await _apply(conn, files)
            if app_password is not None:
                # ALTER ROLE takes no bind parameters; quote_literal keeps the password a literal.
                quoted = await conn.fetchval("SELECT quote_literal($1::text)", app_password)
                for role in SERVICE_ROLES:
                    await conn.execute(f"ALTER ROLE {role} PASSWORD {quoted}")
        return applied
    finally:
        await conn.close()


async def _apply(conn: Any, files: list[SchemaFile]) -> list[str]:
    versions = {(r["owner"], r["version"]): r["checksum"] for r in await conn.fetch(APPLIED_VERSIONS)}
    repeatables = {(r["owner"], r["name"]): r["checksum"] for r in await conn.fetch(APPLIED_REPEATABLES)}
    applied = []
    for file in (f for f in files if f.kind == "versioned"):
        recorded = versions.get((file.owner, file.version))
        if recorded is not None:
            if recorded != file.checksum:
                log.warning("%s changed after it was applied; the change is not applied", file.label)
            continue
        log.info("applying %s", file.label)
        await conn.execute(file.sql)
        await conn.execute(RECORD_VERSION, file.owner, file.version, file.name, file.checksum)
        applied.append(file.label)
    changed = [f for f in files if f.kind == "repeatable" and repeatables.get((f.owner, f.name)) != f.checksum]
    # Defined first without checking bodies, so the files need no order among themselves (a LANGUAGE sql body is
    # checked at CREATE and may call a function of a later file), then once more with bodies checked, now that
    # everything they name exists: a body naming something missing still fails the migration.
    await conn.execute(UNCHECKED_BODIES)
    for file in changed:
        log.info("applying %s", file.label)
        await conn.execute(file.sql)
    await conn.execute(CHECKED_BODIES)
    for file in changed:
        await conn.execute(file.sql)
        await conn.execute(RECORD_REPEATABLE, file.owner, file.name, file.checksum)
        applied.append(file.label)
    return applied


async def _adopt_old_chain(conn: Any, files: list[SchemaFile]) -> None:
    """A database the numbered chain migrated to its end holds exactly what the baselines create: they are recorded
    as applied (the repeatables then re-create identical functions). A database short of that end is refused."""
    if not await conn.fetchval(OLD_CHAIN_UNADOPTED):
        return
    last = await conn.fetchval(OLD_CHAIN_LAST)
    if last is None:
        return
    if last != OLD_CHAIN_END:
        raise SchemaError(
            f"this database was migrated by the numbered migrations up to {last:04d}, not to their end "
            f"({OLD_CHAIN_END:04d}), which the baselines replaced: run `cairn migrate` of a release that still has "
            "libs/platform/src/cairn/platform/migrations/ (commit 504bdc3) first, then this one"
        )
    for file in files:
        if file.name == BASELINE and file.owner in OLD_CHAIN_OWNERS:
            await conn.execute(RECORD_VERSION, file.owner, file.version, file.name, file.checksum)
    log.info("adopted a database migrated to %04d: baselines recorded as applied", last)
