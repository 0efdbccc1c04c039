"""Postgres access: one pool per service, every unit of work inside a tenant-scoped transaction.

Row-level security reads the tenant from the transaction-local setting `cairn.tenant_id`, so a query
that forgets its tenant filter still sees only that tenant's rows.
"""

import contextlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from cairn.platform.settings import PostgresSettings

# One round trip opens the transaction and sets its tenant (a UUID literal, so it cannot carry SQL).
BEGIN_FOR_TENANT = "BEGIN; SELECT set_config('cairn.tenant_id', '{tenant}', true)"

Pool = asyncpg.Pool


async def _transaction_state_only(conn: "asyncpg.Connection[asyncpg.Record]") -> None:
    """Released connections need no reset query: every setting we make is transaction-local, and the pool
    rolls back an open transaction itself. asyncpg's default would cost a round trip per release."""


async def create_pool(settings: PostgresSettings) -> "asyncpg.Pool[asyncpg.Record]":
    pool = await asyncpg.create_pool(
        settings.url.get_secret_value(),
        min_size=settings.pool_min,
        max_size=settings.pool_max,
        command_timeout=60,
        reset=_transaction_state_only,
    )
    return pool


@asynccontextmanager
async def tenant_transaction(
    pool: "asyncpg.Pool[asyncpg.Record]", tenant_id: str
) -> AsyncIterator["asyncpg.pool.PoolConnectionProxy[asyncpg.Record]"]:
    """A transaction in which row-level security admits only `tenant_id`'s rows."""
    begin = BEGIN_FOR_TENANT.format(tenant=uuid.UUID(tenant_id))
    async with pool.acquire() as conn:
        await conn.execute(begin)
        try:
            yield conn
        except BaseException:
            # a connection left mid-statement (cancelled) cannot roll back here: the pool does it on release
            with contextlib.suppress(asyncpg.InterfaceError, asyncpg.PostgresError, OSError):
                await conn.execute("ROLLBACK")
            raise
        await conn.execute("COMMIT")


async def ping(pool: "asyncpg.Pool[asyncpg.Record]") -> None:
    async with pool.acquire() as conn:
        await conn.fetchval("SELECT 1")
