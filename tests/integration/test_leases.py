"""Partition leases in the real Redis: replicas split the partitions fairly and take over the
partitions of a replica that stops renewing."""

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from cairn.delivery.leases import PartitionLeases, fair_share
from cairn.local import LocalStack

pytestmark = pytest.mark.integration


@pytest.fixture
async def redis(stack: LocalStack) -> AsyncIterator[Redis]:
    client = Redis.from_url(stack.redis_url)
    yield client
    await client.aclose()


async def _settle(*replicas: PartitionLeases) -> None:
    """A few rounds of ticks, each replica giving back its surplus as the runner would."""
    for _ in range(3):
        for replica in replicas:
            _, surplus = await replica.tick()
            for partition in surplus:
                await replica.release(partition)


def test_fair_share() -> None:
    assert [fair_share(8, n) for n in (0, 1, 2, 3, 8, 9)] == [8, 8, 4, 3, 1, 1]


async def test_two_replicas_split_the_partitions_without_overlap(redis: Redis) -> None:
    group = f"test-{uuid.uuid4().hex[:8]}"
    first = PartitionLeases(redis, group, 8, ttl_s=5)
    held, _ = await first.tick()
    assert held == set(range(8))  # alone, it runs everything
    second = PartitionLeases(redis, group, 8, ttl_s=5)
    await _settle(first, second)
    assert len(first.held) == 4
    assert len(second.held) == 4
    assert first.held.isdisjoint(second.held)
    await first.leave()
    await _settle(second)
    assert second.held == set(range(8))  # a replica that leaves hands its partitions over at once
    await second.leave()


async def test_a_replica_that_stops_renewing_loses_its_partitions_after_the_ttl(redis: Redis) -> None:
    group = f"test-{uuid.uuid4().hex[:8]}"
    crashed = PartitionLeases(redis, group, 4, ttl_s=1.5)
    await crashed.tick()
    survivor = PartitionLeases(redis, group, 4, ttl_s=1.5)
    held, _ = await survivor.tick()
    assert held == set()  # all taken, and a lease is never stolen while it is alive
    for _ in range(40):  # the crashed replica never ticks again; bounded wait for its leases to lapse
        held, _ = await survivor.tick()
        if held == set(range(4)):
            break
        await asyncio.sleep(0.1)
    assert held == set(range(4))
    await survivor.leave()
