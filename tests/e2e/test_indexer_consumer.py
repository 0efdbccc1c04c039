"""The indexer reads the session stream through one consumer that feeds both its projections: a message's
transcript event is recorded as applied by the full-text index and by the memory index, through that consumer."""

import uuid

import asyncpg
import nats
import pytest

from cairn.events import INDEXER_CONSUMER, SESSION_STREAM
from cairn.local import LocalStack
from tests.conftest import Tenant

pytestmark = pytest.mark.e2e

RECORDS = "SELECT event_id FROM cairn.processed_events WHERE tenant_id = $1 AND consumer = $2"


async def test_one_consumer_of_the_session_stream_feeds_both_projections(services: LocalStack, tenant: Tenant) -> None:
    said = tenant.say("one consumer, two projections", message_id=f"m-{uuid.uuid4()}")
    tenant.search("projections", consistent_with=said["position"])
    client = await nats.connect(services.nats_url)
    try:
        names = {info.name for info in await client.jetstream().consumers_info(SESSION_STREAM)}
    finally:
        await client.close()
    assert INDEXER_CONSUMER in names
    assert not names & {"indexer", "memory-index"}, "the consumers of the release before are gone"
    conn = await asyncpg.connect(services.postgres_url("postgres"))
    try:  # searchable means the full-text part committed, and the memory part commits in the same transaction
        tenant_id = uuid.UUID(tenant.tenant_id)
        search = {r["event_id"] for r in await conn.fetch(RECORDS, tenant_id, "indexer")}
        memory = {r["event_id"] for r in await conn.fetch(RECORDS, tenant_id, "memory-index")}
    finally:
        await conn.close()
    assert search, "the message's transcript event is recorded by the full-text index"
    assert search <= memory, "and by the memory index, already"
