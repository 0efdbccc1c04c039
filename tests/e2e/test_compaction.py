"""Compaction: when the live window crosses the threshold, `session.compaction-imminent` fires once per
cycle and the consolidation service records that a memory flush is due."""

import asyncio
import time

import asyncpg
import nats
import pytest

from cairn.events import SESSION_STREAM, CompactionImminent, decode_event
from cairn.local import LocalStack
from tests.conftest import Tenant
from tests.streams import stream_messages

# The test stack runs with CAIRN_SESSION_CONTEXT_WINDOW=2000: threshold = max(2000 − 24000, 2000 // 10) = 200.
THRESHOLD_TOKENS = 200


async def _compaction_events(stack: LocalStack, tenant_id: str) -> list[CompactionImminent]:
    nc = await nats.connect(stack.nats_url)
    try:
        subject = f"cairn.{tenant_id}.main.session.compaction-imminent"
        events = [decode_event(m.data or b"") for m in await stream_messages(nc.jetstream(), SESSION_STREAM, subject)]
    finally:
        await nc.close()
    assert all(isinstance(e, CompactionImminent) for e in events)
    return [e for e in events if isinstance(e, CompactionImminent)]


async def _flushes_due(stack: LocalStack, tenant_id: str) -> list[tuple[str, int]]:
    conn = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        rows = await conn.fetch(
            "SELECT session_key, cycle FROM consolidation.flushes_due WHERE tenant_id = $1", tenant_id
        )
        return [(r["session_key"], r["cycle"]) for r in rows]
    finally:
        await conn.close()


@pytest.mark.e2e
def test_compaction_imminent_fires_once_per_cycle(services: LocalStack, tenant: Tenant) -> None:
    sentence = "We compared three vendors on price, support hours and data residency in detail. "  # ~20 tokens
    last = {}
    for i in range(30):  # ~600 tokens: three times the threshold, still one cycle
        last = tenant.say(f"{sentence} (note {i})", message_id=f"c{i}")
    tenant.search("vendors", consistent_with=last["position"])

    deadline = time.monotonic() + 20
    due = asyncio.run(_flushes_due(services, tenant.tenant_id))
    while not due and time.monotonic() < deadline:
        time.sleep(0.1)
        due = asyncio.run(_flushes_due(services, tenant.tenant_id))
    assert due == [("agent:main:main", 0)]

    events = asyncio.run(_compaction_events(services, tenant.tenant_id))
    assert len(events) == 1
    assert events[0].session_key == "agent:main:main"
    assert events[0].threshold_tokens == THRESHOLD_TOKENS
    assert events[0].estimated_tokens >= THRESHOLD_TOKENS


@pytest.mark.e2e
def test_a_compaction_report_closes_the_cycle(services: LocalStack, tenant: Tenant) -> None:
    sentence = "We compared three vendors on price, support hours and data residency in detail. "
    last: dict[str, str] = {}
    for i in range(15):  # ~300 tokens: one crossing
        last = tenant.say(f"{sentence} (note {i})", message_id=f"k{i}")
    tenant.search("vendors", consistent_with=last["position"])
    unknown = tenant.ingest.post("/v1/sessions/agent:main:nobody/compaction", json={"first_kept_message_id": "k1"})
    assert unknown.status_code == 404
    missing = tenant.ingest.post("/v1/sessions/agent:main:main/compaction", json={"first_kept_message_id": "zz"})
    assert missing.status_code == 422
    assert missing.json()["errors"][0]["field"] == "first_kept_message_id"
    report = tenant.ingest.post("/v1/sessions/agent:main:main/compaction", json={"first_kept_message_id": "k14"})
    assert report.status_code == 202
    for i in range(15, 30):
        last = tenant.say(f"{sentence} (note {i})", message_id=f"k{i}")
    tenant.search("vendors", consistent_with=last["position"])

    deadline = time.monotonic() + 20
    due = asyncio.run(_flushes_due(services, tenant.tenant_id))
    while len(due) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
        due = asyncio.run(_flushes_due(services, tenant.tenant_id))
    assert sorted(due) == [("agent:main:main", 0), ("agent:main:main", 1)]
    assert [e.cycle for e in asyncio.run(_compaction_events(services, tenant.tenant_id))] == [0, 1]
