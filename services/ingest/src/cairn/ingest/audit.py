"""The audit log of admin and key actions: who (the admin token or a key's id), which tenant, what, on what,
when and from where. Appended in the same transaction as the action it records (a change that does not commit
leaves no entry); read only by the operator, through an owner-run function (the services cannot read, change
or delete entries)."""

import datetime
import uuid
from dataclasses import dataclass

import asyncpg

from cairn.storage.postgres import tenant_transaction

RECORD = "INSERT INTO ingest.audit_log (actor, tenant_id, action, target, client) VALUES ($1, $2, $3, $4, $5)"
ENTRIES = "SELECT at, actor, tenant_id, action, target, client FROM ingest.audit_entries($1, $2, $3)"
ADMIN_ACTOR = "admin"


@dataclass(frozen=True)
class Actor:
    """Who acts, as the log names it (`admin`, or `key:<key_id>`), and the client address the request came from."""

    name: str
    client: str | None

    @classmethod
    def admin(cls, client: str | None) -> "Actor":
        return cls(ADMIN_ACTOR, client)

    @classmethod
    def key(cls, key_id: str, client: str | None) -> "Actor":
        return cls(f"key:{key_id}", client)


@dataclass(frozen=True)
class AuditEntry:
    at: datetime.datetime
    actor: str
    tenant_id: str
    action: str
    target: str | None
    client: str | None


async def record(conn: "asyncpg.Connection[asyncpg.Record] | asyncpg.pool.PoolConnectionProxy[asyncpg.Record]",
                 actor: Actor, tenant: str, action: str, target: str | None) -> None:  # fmt: skip
    """Append one entry inside the caller's transaction (of `tenant`: row-level security checks it)."""
    await conn.execute(RECORD, actor.name, uuid.UUID(tenant), action, target, actor.client)


class AuditLog:
    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]") -> None:
        self._pool = pool

    async def append(self, actor: Actor, tenant: str, action: str, target: str | None) -> None:
        """An entry of its own, for an action whose store has no transaction to share (the model override's)."""
        async with tenant_transaction(self._pool, tenant) as conn:
            await record(conn, actor, tenant, action, target)

    async def entries(self, tenant: str | None, since: datetime.datetime | None, limit: int) -> list[AuditEntry]:
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(ENTRIES, None if tenant is None else uuid.UUID(tenant), since, limit)
        return [
            AuditEntry(r["at"], r["actor"], str(r["tenant_id"]), r["action"], r["target"], r["client"]) for r in rows
        ]
