"""Connections to the embedded stack for integration tests: the service role's pool, a superuser
connection for setup and checks, and a NATS client per test; plus a bounded poll."""

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import TypeVar

import asyncpg
import pytest
from nats.aio.client import Client
from pydantic import SecretStr

from cairn.delivery.nats import connect
from cairn.local import LocalStack
from cairn.local.stack import OWNER
from cairn.storage.migrations import apply_migrations
from cairn.storage.postgres import create_pool
from cairn.storage.settings import PostgresSettings

T = TypeVar("T")


@pytest.fixture(scope="session")
async def app_pool(stack: LocalStack) -> AsyncIterator["asyncpg.Pool[asyncpg.Record]"]:
    """A pool connected as `cairn_app`, the role every service uses (row-level security applies)."""
    pool = await create_pool(PostgresSettings(url=SecretStr(stack.postgres_url()), pool_min=1, pool_max=4))
    try:
        yield pool
    finally:
        await pool.close()


@pytest.fixture(scope="session")
async def projector_pool(stack: LocalStack) -> AsyncIterator["asyncpg.Pool[asyncpg.Record]"]:
    """A pool connected as `cairn_projector`, the role of the session and indexer services: like `cairn_app`,
    and on the tables projections write it may open a transaction over several tenants."""
    settings = PostgresSettings(url=SecretStr(stack.postgres_url()), pool_min=1, pool_max=4).projector()
    pool = await create_pool(settings)
    try:
        yield pool
    finally:
        await pool.close()


@pytest.fixture
async def admin(stack: LocalStack) -> AsyncIterator["asyncpg.Connection[asyncpg.Record]"]:
    """A superuser connection, for setup and for looking past row-level security in assertions."""
    conn = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture
async def nats_client(stack: LocalStack) -> AsyncIterator[Client]:
    """One NATS connection per test, so pull subscriptions left by a cancelled projection go with it."""
    nc = await connect(stack.nats_url, "cairn-integration-test")
    try:
        yield nc
    finally:
        await nc.close()


@contextlib.asynccontextmanager
async def own_database(stack: LocalStack, prefix: str) -> AsyncIterator[str]:
    """A migrated database of its own on the stack's server, for a test whose background work (or data
    volume) must not reach the shared one; yields its name and drops it afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    port = stack.state.ports["postgres"]
    stack.postgres.create_database(port, name, OWNER)
    try:
        await apply_migrations(stack.database_url(name, OWNER))
        yield name
    finally:
        admin = await asyncpg.connect(stack.postgres_url("postgres").rsplit("/", 1)[0] + "/postgres")
        try:
            await admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
        finally:
            await admin.close()


@contextlib.asynccontextmanager
async def own_database_pool(
    stack: LocalStack, prefix: str, pool_max: int = 4
) -> AsyncIterator["asyncpg.Pool[asyncpg.Record]"]:
    """`own_database` with a pool connected as `cairn_app` (row-level security applies)."""
    async with own_database(stack, prefix) as name:
        url = stack.database_url(name)
        pool = await create_pool(PostgresSettings(url=SecretStr(url), pool_min=1, pool_max=pool_max))
        try:
            yield pool
        finally:
            await pool.close()


@contextlib.asynccontextmanager
async def own_database_with_pgstattuple(
    stack: LocalStack, prefix: str
) -> AsyncIterator[tuple[str, "asyncpg.Connection[asyncpg.Record]"]]:
    """`own_database` with the pgstattuple extension (a superuser's), for a test that looks inside an index:
    yields the service role's URL and a superuser connection to that database."""
    async with own_database(stack, prefix) as name:
        superuser = await asyncpg.connect(stack.database_url(name, "postgres"))
        try:
            await superuser.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
            yield stack.database_url(name), superuser
        finally:
            await superuser.close()


async def eventually(check: Callable[[], Awaitable[T]], within: float = 15.0, interval: float = 0.05) -> T:
    """Poll `check` until it returns something truthy; bounded, and the last result is returned either way."""
    deadline = time.monotonic() + within
    while True:
        result = await check()
        if result or time.monotonic() > deadline:
            return result
        await asyncio.sleep(interval)


async def holds_for(check: Callable[[], Awaitable[bool]], seconds: float, interval: float = 0.1) -> bool:
    """Whether `check` stays true, polled for `seconds`: for proving that something does not happen."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not await check():
            return False
        await asyncio.sleep(interval)
    return await check()


async def postgres_now(stack: LocalStack) -> datetime:
    """The database's clock (the one `pg_stat_activity.backend_start` is in)."""
    admin = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        now: datetime = await admin.fetchval("SELECT clock_timestamp()")
        return now
    finally:
        await admin.close()


async def listening_since(stack: LocalStack, since: datetime, channel: str) -> bool:
    """Whether a backend started after `since` has run a LISTEN on `channel` as its latest statement (a commit
    before it would not be notified; an earlier test's listener may still be going away)."""
    admin = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        return bool(await admin.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_start >= $1 AND query LIKE $2",
            since, f"LISTEN %{channel}%",
        ))  # fmt: skip
    finally:
        await admin.close()
