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
from cairn.ingest.store import CONFIG_CHANNEL, AgentConfigs, StoredConfig, VersionConflict
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


def _counting_reads(configs: AgentConfigs) -> list[tuple[str, str]]:
    """The config reads `configs` makes from now on (routing reads through `get`)."""
    reads: list[tuple[str, str]] = []
    read = configs.get

    async def counted(tenant: str, agent: str) -> StoredConfig:
        reads.append((tenant, agent))
        return await read(tenant, agent)

    configs.get = counted  # type: ignore[method-assign]
    return reads


async def test_the_replica_that_puts_routes_by_what_it_stored_without_reading_it_back(
    app_pool: Pool, stack: LocalStack
) -> None:
    tenant = str(uuid.uuid4())
    replica = AgentConfigs(app_pool, LONG, listen_url=stack.postgres_url(), listen_cache_seconds=LONG)
    other = AgentConfigs(app_pool, cache_seconds=LONG)  # another replica
    async with listening(replica, stack):
        reads = _counting_reads(replica)
        await replica.put(tenant, "main", AgentConfig(dm_scope="per-peer"), None, _announce)
        assert (await replica.routing(tenant, "main")).dm_scope == "per-peer"
        # its own notification, once it arrives, leaves the entry alone
        assert await eventually(lambda: _no_own_notice(replica))
        assert await holds_for(lambda: _routes(replica, tenant, "per-peer"), 0.5)
        assert reads == []
        # another replica's PUT is still followed at its commit
        await other.put(tenant, "main", AgentConfig(dm_scope="per-channel-peer"), 1, _announce)
        assert await eventually(lambda: _routes(replica, tenant, "per-channel-peer"))
        assert reads == [(tenant, "main")]
        # a PUT that is not stored keeps nothing and expects no notification
        with pytest.raises(VersionConflict):
            await replica.put(tenant, "main", AgentConfig(dm_scope="main"), 1, _announce)
        assert not replica._own_notices
        assert (await replica.routing(tenant, "main")).dm_scope == "per-channel-peer"


async def test_a_replica_that_does_not_listen_keeps_what_it_stored_for_its_short_time(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    configs = AgentConfigs(app_pool, cache_seconds=LONG)
    reads = _counting_reads(configs)
    await configs.put(tenant, "main", AgentConfig(dm_scope="per-peer"), None, _announce)
    assert (await configs.routing(tenant, "main")).dm_scope == "per-peer"
    assert reads == []
    assert not configs._own_notices
    short = AgentConfigs(app_pool, cache_seconds=0)
    short_reads = _counting_reads(short)
    await short.put(tenant, "main", AgentConfig(dm_scope="main"), 1, _announce)
    assert (await short.routing(tenant, "main")).dm_scope == "main"
    assert short_reads == [(tenant, "main")]  # kept no longer than a read would be


async def _no_own_notice(configs: AgentConfigs) -> bool:
    return not configs._own_notices


async def _routes(configs: AgentConfigs, tenant: str, dm_scope: str) -> bool:
    return (await configs.routing(tenant, "main")).dm_scope == dm_scope
