"""The indexer's batch path on real Postgres as `cairn_app`: one tenant's events of a fetched batch become
full-text rows in one statement and per-agent read-your-writes positions in one more."""

import uuid
from typing import TypeAlias

import asyncpg
import pytest

from cairn.events import Event, ResetBoundary, SessionCreated, TranscriptAppended
from cairn.indexer.handlers import IndexerProjection
from cairn.platform.consumer import Delivery
from cairn.platform.postgres import tenant_transaction
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


async def apply(pool: Pool, events: list[Event]) -> None:
    async with tenant_transaction(pool, events[0].tenant_id) as conn:
        unit = IndexerProjection().begin(conn, events)
        for number, event in enumerate(events, start=1):
            assert await unit.handle(event, Delivery(number, 1, "cairn.test")) == []
        await unit.complete()


async def test_a_batch_indexes_user_and_assistant_text_and_advances_each_agent(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    repeated = str(uuid.uuid4())
    events: list[Event] = [
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
    await apply(app_pool, events)
    await apply(app_pool, [appended(tenant, "helper", 3, "later", seq=5)])  # an older position never goes back

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
