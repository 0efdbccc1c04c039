"""Replicas keep agent configs for routing and forget one when any replica's PUT commits (LISTEN/NOTIFY): with a
fallback time far longer than the test, another replica still routes by the new config at once; without the
listener (the control) it keeps the old one; a lost listening connection is replaced."""

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import TypeAlias

import asyncpg
import pytest

from cairn.events import AgentConfig
from cairn.ingest.store import CONFIG_CHANNEL, AgentConfigs
from cairn.local import LocalStack
from tests.integration.conftest import eventually, holds_for, listening_since, postgres_now

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
LONG = 3600.0  # a cache time no entry here lives to see


async def _announce(version: int) -> None:
    pass


@contextlib.asynccontextmanager
async def listening(configs: AgentConfigs, stack: LocalStack) -> AsyncIterator[None]:
    since = await postgres_now(stack)
    task = asyncio.create_task(configs.run())
    assert await eventually(lambda: listening_since(stack, since, CONFIG_CHANNEL)), "the listener's LISTEN never ran"
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_put_on_one_replica_reaches_a_listening_replica_at_its_commit(
    app_pool: Pool, stack: LocalStack
) -> None:
    tenant = str(uuid.uuid4())
    writer = AgentConfigs(app_pool, cache_seconds=LONG)
    replica = AgentConfigs(app_pool, LONG, listen_url=stack.postgres_url(), listen_cache_seconds=LONG)
    unlistened = AgentConfigs(app_pool, cache_seconds=LONG)  # the control: no listener running
    async with listening(replica, stack):
        assert (await replica.routing(tenant, "main")).dm_scope == "main"
        assert (await replica.routing(tenant, "ops")).dm_scope == "main"
        assert (await unlistened.routing(tenant, "main")).dm_scope == "main"
        await writer.put(tenant, "main", AgentConfig(dm_scope="per-peer"), None, _announce)

        async def follows() -> bool:
            return (await replica.routing(tenant, "main")).dm_scope == "per-peer"

        assert await eventually(follows)
        assert (await unlistened.routing(tenant, "main")).dm_scope == "main"  # kept: nothing told it
        assert (await writer.routing(tenant, "main")).dm_scope == "per-peer"
        # another agent's entry is kept: only the changed one is forgotten
        await writer.put(tenant, "ops", AgentConfig(dm_scope="per-peer"), None, _announce)
        await writer.put(tenant, "main", AgentConfig(dm_scope="per-channel-peer"), 1, _announce)

        async def follows_again() -> bool:
            return (await replica.routing(tenant, "main")).dm_scope == "per-channel-peer"

        assert await eventually(follows_again)
        assert (await replica.routing(tenant, "ops")).dm_scope == "per-peer"


async def test_a_change_that_is_not_stored_is_not_notified(app_pool: Pool, stack: LocalStack) -> None:
    tenant = str(uuid.uuid4())
    writer = AgentConfigs(app_pool, cache_seconds=LONG)
    replica = AgentConfigs(app_pool, LONG, listen_url=stack.postgres_url(), listen_cache_seconds=LONG)
    async with listening(replica, stack):
        assert (await replica.routing(tenant, "main")).dm_scope == "main"

        async def fail(version: int) -> None:
            raise ConnectionError("JetStream is away")

        with pytest.raises(ConnectionError):
            await writer.put(tenant, "main", AgentConfig(dm_scope="per-peer"), None, fail)
        # the cached entry stays; a notification would make the replica read again (and count a change)
        changes = replica._changes

        async def unchanged() -> bool:
            return replica._changes == changes and (await replica.routing(tenant, "main")).dm_scope == "main"

        assert await holds_for(unchanged, 1.0)


async def test_a_lost_listening_connection_is_replaced_and_what_was_cached_forgotten(
    app_pool: Pool, stack: LocalStack
) -> None:
    tenant = str(uuid.uuid4())
    writer = AgentConfigs(app_pool, cache_seconds=LONG)
    replica = AgentConfigs(app_pool, LONG, listen_url=stack.postgres_url(), listen_cache_seconds=LONG)
    async with listening(replica, stack):
        assert (await replica.routing(tenant, "main")).dm_scope == "main"
        since = await postgres_now(stack)
        admin = await asyncpg.connect(stack.postgres_url("postgres"))
        try:
            killed = await admin.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query LIKE $1",
                f"LISTEN %{CONFIG_CHANNEL}%",
            )
        finally:
            await admin.close()
        assert killed >= 1
        # a change while nobody listens is not missed: the reconnected listener starts from an empty cache
        await writer.put(tenant, "main", AgentConfig(dm_scope="per-peer"), None, _announce)
        assert await eventually(lambda: listening_since(stack, since, CONFIG_CHANNEL)), "the listener did not come back"
        assert (await replica.routing(tenant, "main")).dm_scope == "per-peer"
        await writer.put(tenant, "main", AgentConfig(dm_scope="per-channel-peer"), 1, _announce)

        async def follows() -> bool:
            return (await replica.routing(tenant, "main")).dm_scope == "per-channel-peer"

        assert await eventually(follows)
