"""The figures of a service's event consumers on `/metrics`: what each applied, retried and dead-lettered and how far
behind it is (counted in memory on the way: cairn.delivery.counts), and what JetStream holds for it (messages
pending and awaiting an ack, dead letters held), read when a scrape comes.

Reading JetStream is one request per consumer and one for the dead-letter stream, made concurrently, bounded by
`CAIRN_METRICS_NATS_WAIT_S` and reused for `CAIRN_METRICS_CACHE_S`, so a slow or absent NATS never stalls a scrape.
When NATS did not answer in time, `cairn_jetstream_figures_up` is 0 and the JetStream series are left out (rather
than last values passed off as current); the in-memory figures are reported as always."""

import asyncio
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import ConsumerInfo
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from cairn.delivery.counts import counts_of
from cairn.delivery.dead_letters import count_dead_letters
from cairn.delivery.partitioned import PartitionedConsumers
from cairn.delivery.pull import Consumer, PullConsumer
from cairn.platform.settings import MetricsSettings

log = logging.getLogger(__name__)
CONSUMER = ("consumer", "stream")


def pull_consumers(wired: Sequence[Consumer]) -> list[tuple[str, str]]:
    """(consumer, stream) of every pull consumer a service runs, each partition of a partitioned one included
    (whichever this replica holds now: JetStream's figures are the same seen from every replica)."""
    members = [m for c in wired for m in (c.partition_consumers() if isinstance(c, PartitionedConsumers) else [c])]
    return list(dict.fromkeys((m.consumer, m.stream) for m in members if isinstance(m, PullConsumer)))


@dataclass(frozen=True)
class JetStreamReading:
    consumers: dict[tuple[str, str], ConsumerInfo]  # a consumer not created yet is left out
    dead_letters: dict[str, int]  # held per consumer name, every consumer's (those without any left out)


class ConsumerMetrics:
    """A Prometheus collector over one service's consumers; `refresh` before each collection reads JetStream (or
    reuses a recent reading)."""

    def __init__(self, js: JetStreamContext, consumers: Sequence[tuple[str, str]], settings: MetricsSettings) -> None:
        self._js, self._consumers, self._settings = js, list(consumers), settings
        self._lock = asyncio.Lock()
        self._read_at: float | None = None
        self.reading: JetStreamReading | None = None

    async def refresh(self) -> None:
        """Read JetStream unless a reading (or a failure to get one) is younger than `cache_s`; one at a time, so
        scrapes arriving together share a reading."""
        async with self._lock:
            if self._read_at is not None and time.monotonic() - self._read_at < self._settings.cache_s:
                return
            try:
                async with asyncio.timeout(self._settings.nats_wait_s):
                    self.reading = await self._read()
            except* (TimeoutError, nats.errors.Error, OSError) as failed:
                log.warning("metrics without JetStream's figures: %s", _described(failed))
                self.reading = None
            self._read_at = time.monotonic()

    async def _read(self) -> JetStreamReading:
        async with asyncio.TaskGroup() as group:
            letters = group.create_task(count_dead_letters(self._js))
            infos = {name: group.create_task(self._info(*name)) for name in self._consumers}
        found = {name: info for name, task in infos.items() if (info := task.result()) is not None}
        return JetStreamReading(found, letters.result())

    async def _info(self, consumer: str, stream: str) -> ConsumerInfo | None:
        try:
            info: ConsumerInfo = await self._js.consumer_info(stream, consumer)
        except nats.js.errors.NotFoundError:
            return None  # not created yet: the consumer creates it when it first runs
        return info

    def collect(self) -> Iterator[Metric]:
        yield from self._counted()
        yield from self._held()

    def _counted(self) -> Iterator[Metric]:
        applied = CounterMetricFamily(
            "cairn_consumer_events_applied", "Events a consumer applied (or found applied before) and acknowledged",
            labels=CONSUMER,
        )  # fmt: skip
        retried = CounterMetricFamily(
            "cairn_consumer_events_retried",
            "Events tried again: failure=transient when a dependency was away (held and retried in process, never "
            "dead-lettered; counted per attempt), other when the event failed for another reason (redelivered, and "
            "dead-lettered after CAIRN_NATS_MAX_DELIVER deliveries)",
            labels=(*CONSUMER, "failure"),
        )
        dead = CounterMetricFamily(
            "cairn_consumer_events_dead_lettered",
            "Events a consumer could not apply and parked in the dead-letter stream (see `cairn dead-letters list`)",
            labels=CONSUMER,
        )
        lag = GaugeMetricFamily(
            "cairn_consumer_lag_seconds",
            "How long ago the oldest event a consumer is working on entered its stream, 0 when it holds none; for the "
            "indexer's consumers, how far search is behind what was written",
            labels=CONSUMER,
        )
        now = time.time()
        for name in self._consumers:
            counts = counts_of(*name)
            applied.add_metric(name, counts.applied)
            retried.add_metric((*name, "transient"), counts.retried_transient)
            retried.add_metric((*name, "other"), counts.retried_other)
            dead.add_metric(name, counts.dead_lettered)
            since = counts.working_since
            lag.add_metric(name, 0.0 if since is None else max(0.0, now - since))
        return iter((applied, retried, dead, lag))

    def _held(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "cairn_jetstream_figures_up",
            "1 when JetStream answered this scrape's reads of consumer and dead-letter figures within "
            "CAIRN_METRICS_NATS_WAIT_S (or a reading of the last CAIRN_METRICS_CACHE_S did), else 0 and those series "
            "are left out",
        )
        reading = self.reading
        up.add_metric((), 0.0 if reading is None else 1.0)
        yield up
        if reading is None:
            return
        pending = GaugeMetricFamily(
            "cairn_consumer_pending_messages", "Messages of its stream a consumer has not been delivered yet",
            labels=CONSUMER,
        )  # fmt: skip
        unacked = GaugeMetricFamily(
            "cairn_consumer_ack_pending_messages", "Messages delivered to a consumer and not acknowledged yet",
            labels=CONSUMER,
        )  # fmt: skip
        redelivered = GaugeMetricFamily(
            "cairn_consumer_redelivered_messages",
            "Messages delivered to a consumer more than once, not acknowledged yet",
            labels=CONSUMER,
        )
        for name, info in reading.consumers.items():
            pending.add_metric(name, info.num_pending or 0)
            unacked.add_metric(name, info.num_ack_pending or 0)
            redelivered.add_metric(name, info.num_redelivered or 0)
        held = GaugeMetricFamily(
            "cairn_dead_letters_held",
            "Dead letters of a consumer in the dead-letter stream now, every tenant's (retried or discarded ones are "
            "gone; a tenant sees its own in GET /v1/memory/status)",
            labels=("consumer",),
        )
        for consumer in dict.fromkeys(consumer for consumer, _ in self._consumers):
            held.add_metric((consumer,), reading.dead_letters.get(consumer, 0))
        yield from (pending, unacked, redelivered, held)


def _described(group: BaseExceptionGroup[BaseException]) -> str:
    return "; ".join(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
                     for error in group.exceptions)  # fmt: skip
