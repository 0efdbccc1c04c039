"""What each consumer of this process has done, counted in memory for the service's metrics: an integer addition
per batch or event on the way, read only when `/metrics` is scraped (cairn.platform.consumer_metrics).

Kept per (consumer, stream) for the life of the process rather than per consumer object, so that a partition's
consumer started again after its lease came back carries on counting instead of starting from zero (a counter that
falls back reads as a process restart to Prometheus)."""

from dataclasses import dataclass


@dataclass(slots=True)
class ConsumerCounts:
    applied: int = 0  # events applied (or found applied before) and acked
    retried_transient: int = 0  # events held and tried again in process after a transient failure, per attempt
    retried_other: int = 0  # events sent back for another delivery after a failure of neither kind (a bug?)
    dead_lettered: int = 0  # events parked in the dead-letter stream
    working_since: float | None = None  # when the oldest event of the batch in hand entered its stream (Unix s)


_COUNTS: dict[tuple[str, str], ConsumerCounts] = {}


def counts_of(consumer: str, stream: str) -> ConsumerCounts:
    """The counts of one consumer of one stream (a name may read several streams), the same object every time."""
    counts = _COUNTS.get((consumer, stream))
    if counts is None:
        counts = _COUNTS[(consumer, stream)] = ConsumerCounts()
    return counts
