"""Postgres access: one pool per service, every unit of work inside a tenant-scoped transaction.

Row-level security reads the tenant from the transaction-local setting `cairn.tenant_id`, so a query
that forgets its tenant filter still sees only that tenant's rows. Projections, logged in as
`cairn_projector`, may instead open a transaction over a set of tenants (`cairn.tenant_ids`: the policy `tenant_batch`
of the platform's schema baseline) to apply a whole fetched batch at once; their statements name each row's tenant.
"""

import contextlib
import uuid
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager

import asyncpg

from cairn.storage.settings import PostgresSettings

# Notified (no payload) by the indexer when it advances a read-your-writes position; recall listens (progress.py).
INDEX_PROGRESS_CHANNEL = "cairn_index_progress"  # session search's index
MEMORY_PROGRESS_CHANNEL = "cairn_memory_progress"  # the memory index: a position advanced or a session chunked

# One round trip opens the transaction and sets its tenant (a UUID literal, so it cannot carry SQL).
BEGIN_FOR_TENANT = "BEGIN; SELECT set_config('cairn.tenant_id', '{tenant}', true)"
BEGIN_FOR_TENANTS = "BEGIN; SELECT set_config('cairn.tenant_ids', '{tenants}', true)"
# Whether this pool's role may open transactions over several tenants.
IS_PROJECTOR = "SELECT pg_has_role(current_user, 'cairn_projector', 'USAGE')"

Pool = asyncpg.Pool


async def _transaction_state_only(conn: "asyncpg.Connection[asyncpg.Record]") -> None:
    """Released connections need no reset query: every setting we make is transaction-local, and the pool
    rolls back an open transaction itself. asyncpg's default would cost a round trip per release."""


async def create_pool(settings: PostgresSettings, connect_timeout_s: float = 60.0) -> "asyncpg.Pool[asyncpg.Record]":
    """The pool; a connection it (re)opens that is not established within `connect_timeout_s` fails with
    TimeoutError (a refused one fails at once), so `acquire` never waits long on a Postgres that is down."""
    pool = await asyncpg.create_pool(
        settings.url.get_secret_value(),
        min_size=settings.pool_min,
        max_size=settings.pool_max,
        command_timeout=60,
        reset=_transaction_state_only,
        timeout=connect_timeout_s,
    )
    return pool


@asynccontextmanager
async def tenant_transaction(
    pool: "asyncpg.Pool[asyncpg.Record]", tenant_id: str
) -> AsyncIterator["asyncpg.pool.PoolConnectionProxy[asyncpg.Record]"]:
    """A transaction in which row-level security admits only `tenant_id`'s rows."""
    async with _transaction(pool, _begin_for_tenant(tenant_id)) as (conn, _):
        yield conn


@asynccontextmanager
async def tenants_transaction(
    pool: "asyncpg.Pool[asyncpg.Record]", tenant_ids: Collection[str]
) -> AsyncIterator["asyncpg.pool.PoolConnectionProxy[asyncpg.Record]"]:
    """A transaction in which row-level security admits the rows of these tenants, on the tables a projection
    writes, for a pool logged in as cairn_projector (`is_projector`); any other role sees none of them."""
    async with _transaction(pool, _begin_for_tenants(tenant_ids)) as (conn, _):
        yield conn


@asynccontextmanager
async def opening_with(
    pool: "asyncpg.Pool[asyncpg.Record]", tenant_ids: Collection[str], first: str
) -> AsyncIterator[tuple["asyncpg.pool.PoolConnectionProxy[asyncpg.Record]", str]]:
    """`tenant_transaction` for one tenant, else `tenants_transaction`, whose opening round trip also runs the
    statement `first`. It travels with BEGIN in one simple query, which carries no parameters: every value in it
    must be a literal the caller made safe. Gives the connection and `first`'s command status ("INSERT 0 5")."""
    tenants = set(tenant_ids)
    begin = _begin_for_tenant(next(iter(tenants))) if len(tenants) == 1 else _begin_for_tenants(tenants)
    async with _transaction(pool, f"{begin}; {first}") as opened:
        yield opened


def _begin_for_tenant(tenant_id: str) -> str:
    return BEGIN_FOR_TENANT.format(tenant=uuid.UUID(tenant_id))


def _begin_for_tenants(tenant_ids: Collection[str]) -> str:
    return BEGIN_FOR_TENANTS.format(tenants=",".join(str(uuid.UUID(t)) for t in sorted(set(tenant_ids))))


async def is_projector(pool: "asyncpg.Pool[asyncpg.Record]") -> bool:
    async with pool.acquire() as conn:
        return bool(await conn.fetchval(IS_PROJECTOR))


@asynccontextmanager
async def _transaction(
    pool: "asyncpg.Pool[asyncpg.Record]", begin: str
) -> AsyncIterator[tuple["asyncpg.pool.PoolConnectionProxy[asyncpg.Record]", str]]:
    """The connection, and the status of the last statement in `begin`."""
    async with pool.acquire() as conn:
        try:
            status = await conn.execute(begin)  # its statements may fail too: rolled back below
            yield conn, status
        except BaseException:
            # a connection left mid-statement (cancelled) cannot roll back here: the pool does it on release
            with contextlib.suppress(asyncpg.InterfaceError, asyncpg.PostgresError, OSError):
                await conn.execute("ROLLBACK")
            raise
        await conn.execute("COMMIT")


async def ping(pool: "asyncpg.Pool[asyncpg.Record]") -> None:
    async with pool.acquire() as conn:
        await conn.fetchval("SELECT 1")


def is_lost_connection(error: BaseException) -> bool:
    """asyncpg's words for a connection that a lost server left unusable, said with its misuse errors: a bare
    InterfaceError ("connection is closed", "pool is closing") or an InternalClientError ("cannot switch to
    state …; another operation is in progress": a query the server's death interrupted)."""
    text = str(error)
    if isinstance(error, asyncpg.InterfaceError):
        return "closed" in text or "closing" in text
    return isinstance(error, asyncpg.InternalClientError) and "another operation" in text
