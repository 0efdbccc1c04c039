"""The raw baseline of `cairn bench load`: the same rows through NATS JetStream into Postgres with no cairn
code at all — nats-py publishes them to a scratch stream, a pull consumer fetches them in batches, asyncpg
COPYs each batch into a scratch table and acks it. What cairn adds on top (HTTP, validation, routing,
sessions, positions, full-text terms, exactly-once bookkeeping, a second hop) is the ratio to this.
"""

import asyncio
import json
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg
import nats
from nats.js.api import ConsumerConfig, StreamConfig

COLUMNS = ("tenant_id", "session_key", "message_id", "role", "sender_name", "text", "occurred_at")
FETCH = 256
WINDOW = 2000  # publishes in flight before waiting for their acks


async def raw_throughput(nats_url: str, postgres_url: str, rows: Sequence[dict[str, str]]) -> float:
    """Messages per second from the first publish until the last row is committed."""
    run = uuid.uuid4().hex[:8]
    stream, subject, table = f"BENCH_RAW_{run}", f"bench.raw.{run}", f"bench_raw_{run}"
    nc = await nats.connect(nats_url, name="cairn-bench-raw")
    js = nc.jetstream()
    db = await asyncpg.connect(postgres_url)
    try:
        await js.add_stream(StreamConfig(name=stream, subjects=[subject]))
        await db.execute(
            f"CREATE TABLE {table} (tenant_id uuid NOT NULL, session_key text NOT NULL, message_id text NOT NULL,"
            " role text NOT NULL, sender_name text, text text NOT NULL, occurred_at timestamptz NOT NULL)"
        )
        subscription = await js.pull_subscribe(subject, durable=f"raw{run}", stream=stream,
                                               config=ConsumerConfig(ack_wait=60))  # fmt: skip
        start = time.perf_counter()
        consumed = asyncio.create_task(_consume(subscription, db, table, len(rows)))
        await _publish(js, subject, rows)
        await consumed
        return len(rows) / (time.perf_counter() - start)
    finally:
        await db.execute(f"DROP TABLE IF EXISTS {table}")
        await db.close()
        await js.delete_stream(stream)
        await nc.close()


async def _publish(js: Any, subject: str, rows: Sequence[dict[str, str]]) -> None:
    pending = []
    for row in rows:
        pending.append(await js.publish_async(subject, json.dumps(row).encode()))
        if len(pending) >= WINDOW:
            await asyncio.gather(*pending)
            pending = []
    await asyncio.gather(*pending)


async def _consume(subscription: Any, db: "asyncpg.Connection[Any]", table: str, expected: int) -> None:
    copied = 0
    while copied < expected:
        try:
            messages = await subscription.fetch(FETCH, timeout=1.0)
        except TimeoutError:
            continue
        records = [_record(json.loads(m.data)) for m in messages]
        await db.copy_records_to_table(table, records=records, columns=COLUMNS)
        for message in messages:
            await message.ack()
        copied += len(messages)


def _record(row: dict[str, str]) -> tuple[Any, ...]:
    return (
        uuid.UUID(row["tenant_id"]), row["session_key"], row["message_id"], row["role"], row.get("sender_name"),
        row["text"], datetime.fromisoformat(row["occurred_at"]).astimezone(UTC),
    )  # fmt: skip
