"""Numbered SQL migrations, applied once by an explicit command (`cairn migrate`), never at service start."""

import logging
from dataclasses import dataclass
from importlib import resources

import asyncpg

log = logging.getLogger(__name__)

CREATE_LEDGER = """
CREATE SCHEMA IF NOT EXISTS cairn;
CREATE TABLE IF NOT EXISTS cairn.schema_migrations (
    version    int PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""
# One migrator at a time, whatever the number of Jobs or replicas that call it.
LOCK = "SELECT pg_advisory_xact_lock(7245019)"
APPLIED = "SELECT version FROM cairn.schema_migrations"
RECORD = "INSERT INTO cairn.schema_migrations (version, name) VALUES ($1, $2)"
# The roles services log in as (projections as cairn_projector), all with the one app password.
SERVICE_ROLES = ("cairn_app", "cairn_projector")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available_migrations() -> list[Migration]:
    folder = resources.files("cairn.platform") / "migrations"
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            number, _, rest = entry.name.partition("_")
            found.append(Migration(int(number), rest.removesuffix(".sql"), entry.read_text("utf-8")))
    return sorted(found, key=lambda m: m.version)


async def apply_migrations(admin_url: str, app_password: str | None = None) -> list[str]:
    """Apply every migration not yet recorded; returns the names applied."""
    conn = await asyncpg.connect(admin_url)
    try:
        async with conn.transaction():
            await conn.execute(LOCK)
            await conn.execute(CREATE_LEDGER)
            done = {row["version"] for row in await conn.fetch(APPLIED)}
            applied = []
            for migration in available_migrations():
                if migration.version in done:
                    continue
                log.info("applying migration %04d %s", migration.version, migration.name)
                await conn.execute(migration.sql)
                await conn.execute(RECORD, migration.version, migration.name)
                applied.append(f"{migration.version:04d}_{migration.name}")
            if app_password is not None:
                # ALTER ROLE takes no bind parameters; quote_literal keeps the password a literal.
                quoted = await conn.fetchval("SELECT quote_literal($1::text)", app_password)
                for role in SERVICE_ROLES:
                    await conn.execute(f"ALTER ROLE {role} PASSWORD {quoted}")
        return applied
    finally:
        await conn.close()
