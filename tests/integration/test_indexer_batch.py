"""The indexer's batch path on real Postgres as `cairn_app` (one tenant's events) and as `cairn_projector`
(several tenants' events in one transaction): a fetched batch becomes full-text rows in one statement and
per-agent read-your-writes positions in one more. The memory index's transcript consumer takes several
tenants' events in one transaction as well."""

import uuid
from typing import Any, TypeAlias

import asyncpg
import pytest

from cairn.events import Event, ResetBoundary, SessionCreated, TranscriptAppended
from cairn.indexer.handlers import IndexerProjection
from cairn.indexer.memory_handlers import build_memory_handlers
from cairn.memindex import LocalEmbedder, MemoryIndex, MemoryIndexSettings
from cairn.platform.consumer import BatchHandlers, Delivery, PerEvent
from cairn.platform.postgres import tenant_transaction, tenants_transaction
from cairn.text import build_query

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"


def appended(tenant: str, agent: str, position: int, text: str, role: str = "user", seq: int | None = None,
             message_id: str | None = None) -> TranscriptAppended:  # fmt: skip
    return TranscriptAppended(
        tenant_id=tenant, agent_id=agent, session_key=f"agent:{agent}:main", session_id=str(uuid.uuid5(
            uuid.NAMESPACE_URL, f"{tenant}/{agent}")), position=position, reset_index=0,
        message_id=message_id or str(uuid.uuid4()), role=role, text=text, channel="api", chat_type="direct",
        token_estimate=len(text) // 4, ingest_seq=seq,
    )  # fmt: skip


async def apply(pool: Pool, events: list[Event], handlers: BatchHandlers | None = None) -> None:
    """As the projection does: a single tenant's batch in its tenant transaction, several tenants' together."""
    tenants = {e.tenant_id for e in events}
    transaction = tenant_transaction(pool, tenants.pop()) if len(tenants) == 1 else tenants_transaction(pool, tenants)
    async with transaction as conn:
        unit = (handlers or IndexerProjection()).begin(conn, events)
        for number, event in enumerate(events, start=1):
            assert await unit.handle(event, Delivery(number, 1, "cairn.test")) == []
        await unit.complete()


def scenario(tenant: str) -> list[Event]:
    repeated = str(uuid.uuid4())
    return [
        appended(tenant, "main", 1, "下周二我去上海参加产品发布会", seq=10, message_id=repeated),
        appended(tenant, "main", 2, "tool output about 上海 weather", role="tool", seq=11),
        appended(tenant, "helper", 1, "the helper answers about Shanghai", role="assistant", seq=12),
        appended(tenant, "main", 1, "下周二我去上海参加产品发布会", seq=10, message_id=repeated),  # a re-publish
        SessionCreated(
            tenant_id=tenant,
            session_key="agent:main:dashboard:x",
            session_id=str(uuid.uuid4()),
            chat_type="direct",
            channel="dashboard",
            ingest_seq=14,
        ),
        appended(tenant, "main", 3, "a copy of a forked message", seq=None),
        ResetBoundary(
            tenant_id=tenant,
            agent_id="helper",
            session_key="agent:helper:main",
            session_id=str(uuid.uuid4()),
            position=2,
            reason="new",
            reset_index=1,
            ingest_seq=13,
        ),
    ]


async def test_a_batch_indexes_user_and_assistant_text_and_advances_each_agent(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    await apply(app_pool, scenario(tenant))
    await apply(app_pool, [appended(tenant, "helper", 3, "later", seq=5)])  # an older position never goes back
    await assert_indexed(app_pool, tenant)


async def test_a_batch_of_several_tenants_indexes_each_as_alone(
    app_pool: Pool, projector_pool: Pool, admin: Any
) -> None:
    tenants = [str(uuid.uuid4()) for _ in range(3)]
    scenarios = [scenario(t) for t in tenants]
    await apply(projector_pool, [e for events in zip(*scenarios, strict=True) for e in events])  # interleaved
    writers = await admin.fetch(
        "SELECT DISTINCT xmin::text FROM indexer.messages WHERE tenant_id = ANY($1::uuid[])",
        [uuid.UUID(t) for t in tenants],
    )
    assert len(writers) == 1, "one transaction for every tenant's rows"
    await apply(projector_pool, [appended(t, "helper", 3, "later", seq=5) for t in tenants])
    for tenant in tenants:
        await assert_indexed(app_pool, tenant)


async def assert_indexed(app_pool: Pool, tenant: str) -> None:

    query = build_query("上海")
    assert query is not None
    async with tenant_transaction(app_pool, tenant) as conn:
        indexed = await conn.fetch("SELECT agent_id, role, text FROM indexer.messages ORDER BY agent_id, position")
        found = await conn.fetch("SELECT text FROM indexer.messages WHERE terms @@ $1::tsquery", query.all_terms)
        progress = await conn.fetch("SELECT agent_id, ingest_seq FROM indexer.progress ORDER BY agent_id")
    assert [(r["agent_id"], r["role"]) for r in indexed] == [
        ("helper", "assistant"),
        ("helper", "user"),
        ("main", "user"),
        ("main", "user"),
    ], "tool output is not indexed; the re-published message is indexed once"
    assert [r["text"] for r in found] == ["下周二我去上海参加产品发布会"]
    assert [(r["agent_id"], r["ingest_seq"]) for r in progress] == [("helper", 13), ("main", 14)]


async def test_the_memory_consumer_applies_several_tenants_turns_in_one_transaction(
    app_pool: Pool, projector_pool: Pool, admin: Any
) -> None:
    memory = build_memory_handlers(MemoryIndex(LocalEmbedder(), MemoryIndexSettings()))  # no embedding on this path
    tenants = [str(uuid.uuid4()) for _ in range(3)]
    turns = [
        [appended(t, "main", 1, "we sail to the harbour", seq=20), appended(t, "main", 2, "at nine", "assistant", 21)]
        for t in tenants
    ]
    await apply(projector_pool, [e for pair in zip(*turns, strict=True) for e in pair], PerEvent(memory, True))
    for tenant in tenants:
        async with tenant_transaction(app_pool, tenant) as conn:
            stored = await conn.fetch("SELECT tenant_id, position, text FROM indexer.memory_turns ORDER BY position")
            progress = await conn.fetchval("SELECT ingest_seq FROM indexer.memory_progress WHERE agent_id = 'main'")
            pending = await conn.fetchval("SELECT count(*) FROM indexer.memory_pending")
        assert [(str(r["tenant_id"]), r["position"], r["text"]) for r in stored] == [
            (tenant, 1, "we sail to the harbour"), (tenant, 2, "at nine")
        ]  # fmt: skip
        assert (progress, pending) == (21, 1)
    writers = await admin.fetch(
        "SELECT DISTINCT xmin::text FROM indexer.memory_turns WHERE tenant_id = ANY($1::uuid[])",
        [uuid.UUID(t) for t in tenants],
    )
    assert len(writers) == 1, "one transaction for every tenant's turns"
