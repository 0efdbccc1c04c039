"""A consumer group split into partitions, each run by exactly one replica at a time.

The replica runs a `PullConsumer` for every partition it holds a lease on (see `leases.py`), stops
the ones it loses or gives up (unfinished messages go back at once, in order) and keeps going when
Redis is briefly away — by running nothing, since it can no longer be sure it is the only writer. Each
partition's consumer runs supervised: one that raises is restarted with backoff, its lease kept.
"""

import asyncio
import logging
from collections.abc import Callable

from redis.exceptions import RedisError

from cairn.delivery.leases import PartitionLeases
from cairn.delivery.pull import PullConsumer
from cairn.delivery.supervision import Health, Restarts, supervise

log = logging.getLogger(__name__)


class PartitionedConsumers:
    def __init__(
        self,
        leases: PartitionLeases,
        stream: str,
        make: Callable[[int], PullConsumer],
        interval_s: float = 2.0,
        restarts: Restarts | None = None,
    ) -> None:
        self.consumer, self.stream = leases.group, stream
        self._leases, self._make, self._interval = leases, make, interval_s
        self._restarts = restarts or Restarts.default()
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._healths: dict[int, Health] = {}
        self.health = Health(f"{self.consumer}@{stream}")

    def healths(self) -> list[Health]:
        """Its own (the rebalancing loop's) and those of the partitions it runs now."""
        return [self.health, *(self._healths[p] for p in sorted(self.running) if p in self._healths)]

    def partition_consumers(self) -> list[PullConsumer]:
        """Every partition's consumer, whichever this replica runs now."""
        return [self._make(partition) for partition in range(self._leases.partitions)]

    @property
    def running(self) -> set[int]:
        return {p for p, task in self._tasks.items() if not task.done()}

    async def run(self) -> None:
        try:
            while True:
                await self._rebalance()
                await asyncio.sleep(self._interval)
        finally:
            await self._stop(set(self._tasks))
            await self._leases.leave()

    async def _rebalance(self) -> None:
        try:
            held, surplus = await self._leases.tick()
        except (RedisError, OSError) as error:
            log.error("%s cannot reach Redis, pausing its partitions: %s", self.consumer, error)
            self.health.failing(error)
            await self._stop(set(self._tasks))
            return
        self.health.progressed()
        await self._stop({p for p in self._tasks if p not in held or p in surplus or self._tasks[p].done()})
        for partition in surplus:
            await self._leases.release(partition)
        for partition in sorted(held - surplus - set(self._tasks)):
            log.info("%s runs partition %d", self.consumer, partition)
            consumer = self._make(partition)
            self._healths[partition] = consumer.health
            self._tasks[partition] = asyncio.create_task(
                supervise(consumer.run, consumer.health, self._restarts), name=f"{self.consumer}-{partition}"
            )

    async def _stop(self, partitions: set[int]) -> None:
        """Stop these partitions' consumers and wait until they have given back what they held. A task is
        forgotten only once it has ended, so a stop interrupted by the replica's own shutdown is awaited
        again by `run`'s last stop instead of being left running while the connections close."""
        stopping = {p: self._tasks[p] for p in partitions if p in self._tasks}
        for task in stopping.values():
            task.cancel()
        outcomes = await asyncio.gather(*stopping.values(), return_exceptions=True)
        for (partition, task), outcome in zip(stopping.items(), outcomes, strict=True):
            del self._tasks[partition]
            if isinstance(outcome, Exception):
                log.error("%s stopped with an error", task.get_name(), exc_info=outcome)
