"""The running services sweep the records of processed events once they are older than the retention
(a week by default): the tables that make projections exactly-once do not grow forever."""

import asyncio
import uuid

import asyncpg
import pytest

from cairn.local import LocalStack
from tests.conftest import Tenant

pytestmark = pytest.mark.e2e

RECORDS = "SELECT consumer, event_id FROM cairn.processed_events WHERE tenant_id = $1"


async def test_the_services_sweep_their_records_older_than_the_retention(services: LocalStack, tenant: Tenant) -> None:
    first = tenant.say("a message whose records will age", message_id=f"m-{uuid.uuid4()}")
    tenant.search("records", consistent_with=first["position"])
    conn = await asyncpg.connect(services.postgres_url("postgres"))
    try:
        aged = {(r["consumer"], r["event_id"]) for r in await conn.fetch(RECORDS, tenant.tenant_id)}
        assert {consumer.split("-p")[0] for consumer, _ in aged} >= {"session", "indexer"}
        async with conn.transaction():  # as if written eight days ago
            for table, column in (("processed_events", "processed_at"), ("outbox", "created_at")):
                await conn.execute(
                    f"UPDATE cairn.{table} SET {column} = {column} - interval '8 days' WHERE tenant_id = $1",
                    tenant.tenant_id,
                )
        second = tenant.say("a message written today", message_id=f"m-{uuid.uuid4()}")
        tenant.search("today", consistent_with=second["position"])
        for _ in range(150):
            now = {(r["consumer"], r["event_id"]) for r in await conn.fetch(RECORDS, tenant.tenant_id)}
            if not now & aged:
                break
            await asyncio.sleep(0.2)
        assert now & aged == set(), "every consumer's aged records are swept"
        assert {consumer.split("-p")[0] for consumer, _ in now} >= {"session", "indexer"}, "today's records stay"
        outbox = await conn.fetchval(
            "SELECT count(*) FROM cairn.outbox WHERE tenant_id = $1 AND created_at < now() - interval '1 day'",
            tenant.tenant_id,
        )
        assert outbox == 0, "the aged records' outboxes went with them"
    finally:
        await conn.close()
