"""Partition leases in Redis: which partitions of a consumer group this replica runs.

Per-session order needs one writer per partition at a time, across replicas. Each replica heartbeats
into a member set, takes a fair share of the partitions as expiring leases (SET NX PX), renews what it
holds and gives back what exceeds its share so that a newcomer gets some. Losing Redis loses nothing
durable: leases are rebuilt by the next ticks.
"""

import math
import time
import uuid

from redis.asyncio import Redis

# Renew or release only a lease we still hold; a lease that expired may belong to someone else now.
RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


def fair_share(partitions: int, members: int) -> int:
    return math.ceil(partitions / max(members, 1))


class PartitionLeases:
    def __init__(self, redis: "Redis", group: str, partitions: int, ttl_s: float = 10.0) -> None:
        self._redis, self.group, self.partitions = redis, group, partitions
        self.ttl_ms = int(ttl_s * 1000)
        self.replica = uuid.uuid4().hex
        self.held: set[int] = set()

    def _key(self, partition: int) -> str:
        return f"cairn:lease:{self.group}:{partition}"

    async def _members(self) -> int:
        key, now = f"cairn:members:{self.group}", time.time()
        await self._redis.zadd(key, {self.replica: now})
        await self._redis.zremrangebyscore(key, 0, now - self.ttl_ms / 1000)
        await self._redis.pexpire(key, self.ttl_ms * 3)
        return int(await self._redis.zcard(key))

    async def tick(self) -> tuple[set[int], set[int]]:
        """Heartbeat, renew, take free partitions up to the fair share.

        Returns (held, surplus): the partitions held now, and those beyond the share, which the caller
        stops working on and then `release`s, so that a newcomer can take them.
        """
        share = fair_share(self.partitions, await self._members())
        for partition in sorted(self.held):
            if not await self._redis.eval(RENEW, 1, self._key(partition), self.replica, self.ttl_ms):
                self.held.discard(partition)
        offset = int(self.replica, 16) % self.partitions  # replicas start their search at different places
        for step in range(self.partitions):
            if len(self.held) >= share:
                break
            partition = (offset + step) % self.partitions
            if partition not in self.held and await self._redis.set(
                self._key(partition), self.replica, nx=True, px=self.ttl_ms
            ):
                self.held.add(partition)
        surplus = set(sorted(self.held, reverse=True)[: max(len(self.held) - share, 0)])
        return set(self.held), surplus

    async def release(self, partition: int) -> None:
        await self._redis.eval(RELEASE, 1, self._key(partition), self.replica)
        self.held.discard(partition)

    async def leave(self) -> None:
        for partition in list(self.held):
            await self.release(partition)
        await self._redis.zrem(f"cairn:members:{self.group}", self.replica)
