"""The recall's breaker and result cache in the real Redis (issue 29, "Bounds"): the third consecutive timeout
opens the breaker for every replica, a success in between resets the count, the breaker closes by itself after
its window (and the next timeout reopens it at once), and a Redis that refuses or never answers leaves both
open for business (breaker closed, nothing cached) instead of holding the recall."""

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from redis.asyncio import Redis

from cairn.local import LocalStack
from cairn.local.processes import free_port
from cairn.platform.runtime import redis_client
from cairn.recall.recall_bounds import Breaker, ResultCache
from tests.integration.conftest import eventually
from tests.integration.partition import Partition

pytestmark = pytest.mark.integration
MODEL = "qwen2.5:7b-instruct"
# Far above the bound of a Redis call (0.1 s) and its client's own retries: only a call that waits on a Redis
# that never answers would take this long.
OUTER_BOUND_S = 10.0


@pytest.fixture
async def redis(stack: LocalStack) -> AsyncIterator[Redis]:
    client = redis_client(stack.redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def other_replica(stack: LocalStack) -> AsyncIterator[Redis]:
    client = redis_client(stack.redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def tenant() -> str:
    return str(uuid.uuid4())


async def timeouts(breaker: Breaker, tenant: str, count: int, agent: str = "main", model: str = MODEL) -> None:
    for _ in range(count):
        await breaker.record(tenant, agent, model, timed_out=True)


async def test_the_third_consecutive_timeout_opens_the_breaker_for_that_tenant_agent_and_model_only(
    redis: Redis, tenant: str
) -> None:
    breaker = Breaker(redis)
    await timeouts(breaker, tenant, 2)
    assert not await breaker.is_open(tenant, "main", MODEL)
    await timeouts(breaker, tenant, 1)
    assert await breaker.is_open(tenant, "main", MODEL)
    _, opened = breaker._keys(tenant, "main", MODEL)
    assert 0 < await redis.pttl(opened) <= 60_000  # it closes by itself, even with no replica left to close it
    assert not await breaker.is_open(tenant, "other-agent", MODEL)
    assert not await breaker.is_open(tenant, "main", "another-model")
    assert not await breaker.is_open(str(uuid.uuid4()), "main", MODEL)


async def test_two_timeouts_a_success_and_a_timeout_leave_it_closed(redis: Redis, tenant: str) -> None:
    breaker = Breaker(redis)
    await timeouts(breaker, tenant, 2)
    await breaker.record(tenant, "main", MODEL, timed_out=False)
    await timeouts(breaker, tenant, 1)
    assert not await breaker.is_open(tenant, "main", MODEL)
    await timeouts(breaker, tenant, 2)  # now three in a row
    assert await breaker.is_open(tenant, "main", MODEL)


async def test_two_replicas_count_together_and_see_the_same_state(
    redis: Redis, other_replica: Redis, tenant: str
) -> None:
    one, two = Breaker(redis), Breaker(other_replica)
    await timeouts(one, tenant, 1)
    await timeouts(two, tenant, 1)
    await timeouts(one, tenant, 1)
    assert await one.is_open(tenant, "main", MODEL)
    assert await two.is_open(tenant, "main", MODEL)


async def test_concurrent_timeouts_of_many_replicas_open_it_once_counted_atomically(
    redis: Redis, other_replica: Redis, tenant: str
) -> None:
    """Two timeouts at once from each of two replicas: the count is not lost between read and write."""
    one, two = Breaker(redis, threshold=4), Breaker(other_replica, threshold=4)
    await asyncio.gather(*(b.record(tenant, "main", MODEL, timed_out=True) for b in (one, two, one)))
    assert not await two.is_open(tenant, "main", MODEL)
    await two.record(tenant, "main", MODEL, timed_out=True)
    assert await one.is_open(tenant, "main", MODEL)


async def test_it_closes_by_itself_after_the_window_and_the_next_timeout_reopens_it(
    redis: Redis, other_replica: Redis, tenant: str
) -> None:
    breaker, replica = Breaker(redis, open_s=0.5), Breaker(other_replica, open_s=0.5)
    await timeouts(breaker, tenant, 3)
    assert await replica.is_open(tenant, "main", MODEL)

    async def closed() -> bool:
        return not await replica.is_open(tenant, "main", MODEL)

    await eventually(closed, within=10)
    await timeouts(replica, tenant, 1)  # the probe after the window timed out too: open again at once
    assert await breaker.is_open(tenant, "main", MODEL)
    await eventually(closed, within=10)
    await replica.record(tenant, "main", MODEL, timed_out=False)  # the probe answered: the count starts over
    await timeouts(breaker, tenant, 2)
    assert not await breaker.is_open(tenant, "main", MODEL)


async def test_the_result_cache_keeps_an_answer_per_tenant_agent_session_and_query_for_its_ttl(
    redis: Redis, other_replica: Redis, tenant: str
) -> None:
    cache, replica = ResultCache(redis, ttl_s=0.5), ResultCache(other_replica, ttl_s=0.5)
    answer = {"outcome": "injected", "block": "<active_memory_plugin>上海</active_memory_plugin>", "lane": 1}
    await cache.put(tenant, "main", "agent:main:main", "我下周有什么安排？", answer)
    assert await replica.get(tenant, "main", "agent:main:main", "我下周有什么安排？") == answer
    assert await replica.get(tenant, "main", "agent:main:main", "我下周有什么安排") is None
    assert await replica.get(tenant, "main", "agent:main:dashboard:x", "我下周有什么安排？") is None
    assert await replica.get(tenant, "other", "agent:main:main", "我下周有什么安排？") is None
    assert await replica.get(str(uuid.uuid4()), "main", "agent:main:main", "我下周有什么安排？") is None

    async def expired() -> bool:
        return await replica.get(tenant, "main", "agent:main:main", "我下周有什么安排？") is None

    await eventually(expired, within=10)


async def test_an_answer_over_the_size_bound_is_not_cached(redis: Redis, tenant: str) -> None:
    cache = ResultCache(redis, max_bytes=1024)
    await cache.put(tenant, "main", "agent:main:main", "q", {"block": "x" * 2000})
    assert await cache.get(tenant, "main", "agent:main:main", "q") is None
    await cache.put(tenant, "main", "agent:main:main", "q", {"block": "x" * 200})
    assert await cache.get(tenant, "main", "agent:main:main", "q") == {"block": "x" * 200}


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers: a Redis that hangs (a full or partitioned server)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


@pytest.mark.parametrize("where", ["refused", "silent"])
async def test_a_redis_that_refuses_or_never_answers_fails_open(where: str, silent_port: int, tenant: str) -> None:
    port = silent_port if where == "silent" else free_port()  # nothing listens on a free port
    client = redis_client(f"redis://127.0.0.1:{port}/0")
    try:
        breaker, cache = Breaker(client), ResultCache(client)
        async with asyncio.timeout(OUTER_BOUND_S):
            await timeouts(breaker, tenant, 3)
            assert not await breaker.is_open(tenant, "main", MODEL)
            await breaker.record(tenant, "main", MODEL, timed_out=False)
            await cache.put(tenant, "main", "agent:main:main", "q", {"outcome": "none"})
            assert await cache.get(tenant, "main", "agent:main:main", "q") is None
    finally:
        await client.aclose()


async def test_a_redis_that_goes_silent_on_established_connections_fails_open(stack: LocalStack, tenant: str) -> None:
    """The connections were made and used; then the network to Redis goes silent (partition)."""
    port = int(stack.redis_url.rsplit(":", 1)[1].split("/", 1)[0])
    async with Partition(port) as relay:
        client = redis_client(stack.redis_url.replace(f":{port}/", f":{relay.port}/"))
        try:
            breaker, cache = Breaker(client), ResultCache(client)
            await timeouts(breaker, tenant, 3)
            assert await breaker.is_open(tenant, "main", MODEL)
            relay.partition()
            async with asyncio.timeout(OUTER_BOUND_S):
                assert not await breaker.is_open(tenant, "main", MODEL)  # fail open: treated as closed
                assert await cache.get(tenant, "main", "agent:main:main", "q") is None
            relay.heal()

            async def open_again() -> bool:
                return await breaker.is_open(tenant, "main", MODEL)

            assert await eventually(open_again, within=OUTER_BOUND_S)  # the breaker's state was never lost
        finally:
            await client.aclose()
