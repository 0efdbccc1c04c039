"""Records of processed events (and the outbox stored with each) are swept once no redelivery can need
them: older than the retention, per consumer, never younger than an hour whatever a caller asks."""

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import TypeAlias

import asyncpg
import pytest

from cairn.delivery.retention import sweep_processed

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
Admin: TypeAlias = "asyncpg.Connection[asyncpg.Record]"
WEEK = timedelta(days=7)

RECORD = """
INSERT INTO cairn.processed_events (consumer, event_id, tenant_id, processed_at)
VALUES ($1, $2, $3, now() - $4::interval)
"""
OUTBOX = """
INSERT INTO cairn.outbox (consumer, causation_id, seq, tenant_id, event, created_at)
VALUES ($1, $2, 0, $3, '{}'::jsonb, now() - $4::interval)
"""


async def record(admin: Admin, consumer: str, age: timedelta, tenant: uuid.UUID | None = None) -> uuid.UUID:
    """A processed event with one emitted event in its outbox, `age` old; written past row-level security."""
    event_id, tenant = uuid.uuid4(), tenant or uuid.uuid4()
    await admin.execute(RECORD, consumer, event_id, tenant, age)
    await admin.execute(OUTBOX, consumer, event_id, tenant, age)
    return event_id


async def kept(admin: Admin, consumer: str) -> tuple[set[uuid.UUID], set[uuid.UUID]]:
    """The consumer's recorded event ids, and the causes its outbox still holds."""
    records = await admin.fetch("SELECT event_id FROM cairn.processed_events WHERE consumer = $1", consumer)
    outbox = await admin.fetch("SELECT causation_id FROM cairn.outbox WHERE consumer = $1", consumer)
    return {r["event_id"] for r in records}, {r["causation_id"] for r in outbox}


def consumers(count: int) -> Sequence[str]:
    return [f"test-sweep-{uuid.uuid4().hex[:8]}" for _ in range(count)]


async def test_records_older_than_the_retention_go_with_their_outbox_across_tenants(
    app_pool: Pool, admin: Admin
) -> None:
    (consumer,) = consumers(1)
    for _ in range(3):  # three tenants
        await record(admin, consumer, timedelta(days=8))
    recent = {await record(admin, consumer, timedelta(days=6)), await record(admin, consumer, timedelta(0))}
    assert await sweep_processed(app_pool, [consumer], WEEK) == 3
    assert await kept(admin, consumer) == (recent, recent)


async def test_only_the_named_consumers_records_are_swept(app_pool: Pool, admin: Admin) -> None:
    mine, other = consumers(2)
    tenant = uuid.uuid4()
    await record(admin, mine, timedelta(days=30), tenant)
    theirs = await record(admin, other, timedelta(days=30), tenant)
    assert await sweep_processed(app_pool, [mine], WEEK) == 1
    assert await kept(admin, mine) == (set(), set())
    assert await kept(admin, other) == ({theirs}, {theirs})


async def test_a_backlog_larger_than_a_batch_is_swept_in_one_sweep(app_pool: Pool, admin: Admin) -> None:
    (consumer,) = consumers(1)
    for _ in range(7):
        await record(admin, consumer, timedelta(days=10))
    assert await sweep_processed(app_pool, [consumer], WEEK, batch=3) == 7
    assert await kept(admin, consumer) == (set(), set())


async def test_no_retention_a_caller_asks_for_deletes_a_record_younger_than_an_hour(
    app_pool: Pool, admin: Admin
) -> None:
    (consumer,) = consumers(1)
    fresh = await record(admin, consumer, timedelta(minutes=50))
    older = await record(admin, consumer, timedelta(minutes=70))
    # a retention of "everything before tomorrow", straight through the function
    gone = await app_pool.fetchval("SELECT cairn.forget_processed($1, now() + interval '1 day', 100)", consumer)
    assert gone == 1
    assert await kept(admin, consumer) == ({fresh}, {fresh})
    assert older not in (await kept(admin, consumer))[0]


async def test_the_services_role_cannot_read_or_delete_records_directly(app_pool: Pool, admin: Admin) -> None:
    (consumer,) = consumers(1)
    event_id = await record(admin, consumer, timedelta(days=30))
    async with app_pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM cairn.processed_events WHERE consumer = $1", consumer) == 0
        assert await conn.execute("DELETE FROM cairn.processed_events WHERE consumer = $1", consumer) == "DELETE 0"
    assert await kept(admin, consumer) == ({event_id}, {event_id})
