"""Postgres access: one pool per service, every unit of work inside a tenant-scoped transaction.

Row-level security reads the tenant from the transaction-local setting `cairn.tenant_id`, so a query
that forgets its tenant filter still sees only that tenant's rows.
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from cairn.platform.settings import PostgresSettings

SET_TENANT = "SELECT set_config('cairn.tenant_id', $1, true)"

Pool = asyncpg.Pool


async def create_pool(settings: PostgresSettings) -> "asyncpg.Pool[asyncpg.Record]":
    pool = await asyncpg.create_pool(
        settings.url.get_secret_value(),
        min_size=settings.pool_min,
        max_size=settings.pool_max,
        command_timeout=60,
    )
    return pool


@asynccontextmanager
async def tenant_transaction(
    pool: "asyncpg.Pool[asyncpg.Record]", tenant_id: str
) -> AsyncIterator["asyncpg.pool.PoolConnectionProxy[asyncpg.Record]"]:
    """A transaction in which row-level security admits only `tenant_id`'s rows."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(SET_TENANT, tenant_id)
        yield conn


async def ping(pool: "asyncpg.Pool[asyncpg.Record]") -> None:
    async with pool.acquire() as conn:
        await conn.fetchval("SELECT 1")
