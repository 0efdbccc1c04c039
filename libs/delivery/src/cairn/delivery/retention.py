"""Sweeping the records that make projections exactly-once once no redelivery can need them.

Every projection records `(consumer, event_id)` and its outbox for each event it applies (consumer.py).
They matter while the event may come again, a redelivery after a crash or a late duplicate, which is
minutes; kept forever they would outgrow everything else. Each service deletes its own consumers' records
older than `CAIRN_PROCESSED_KEEP_H`, in bounded batches, at a random point of every sweep interval so
that replicas spread out. Migration 0051 never lets a sweep delete a record less than an hour old.
"""

import asyncio
import logging
import random
from collections.abc import Sequence
from datetime import timedelta

import asyncpg

from cairn.delivery.consumer import Projection
from cairn.delivery.partitioned import PartitionedConsumers
from cairn.delivery.pull import Consumer
from cairn.delivery.settings import ProcessedSettings

log = logging.getLogger(__name__)

FORGET = "SELECT cairn.forget_processed($1, now() - $2::interval, $3)"
BATCH = 5000  # records per statement: a short transaction, however large the backlog


def recording_consumers(consumers: Sequence[Consumer]) -> list[str]:
    """The names under which these consumers record processed events: projections, partitioned or not, and each
    projection a merged consumer feeds (`Projection.merged`: its parts record under their own names); each once."""
    members = [m for c in consumers for m in (c.partition_consumers() if isinstance(c, PartitionedConsumers) else [c])]
    return list(dict.fromkeys(name for m in members if isinstance(m, Projection) for name in m.recording_names))


async def sweep_processed(
    pool: "asyncpg.Pool[asyncpg.Record]", consumers: Sequence[str], keep: timedelta, batch: int = BATCH
) -> int:
    """Delete the consumers' records (and their outboxes) processed more than `keep` ago; how many went."""
    total = 0
    for consumer in consumers:
        while True:
            gone: int = await pool.fetchval(FORGET, consumer, keep, batch)
            total += gone
            if gone < batch:
                break
    return total


async def keep_sweeping(
    pool: "asyncpg.Pool[asyncpg.Record]", consumers: Sequence[str], settings: ProcessedSettings
) -> None:
    """Sweep once per interval, until cancelled; a failed sweep is logged and tried again next time."""
    keep = timedelta(hours=settings.keep_h)
    await asyncio.sleep(random.uniform(0, settings.sweep_s))
    while True:
        try:
            gone = await sweep_processed(pool, consumers, keep)
        except (OSError, asyncpg.PostgresError) as error:
            log.warning("could not sweep processed-event records, will try again: %s", error)
        else:
            if gone:
                log.info("swept %d processed-event records older than %s", gone, keep)
        await asyncio.sleep(settings.sweep_s)
