"""The indexer's batch path on real Postgres as `cairn_app` (one tenant's events) and as `cairn_projector`
(several tenants' events in one transaction): a fetched batch becomes full-text rows in one statement and
per-agent read-your-writes positions in one more. The memory index's transcript consumer takes several
tenants' events in one transaction as well."""

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, TypeAlias

import asyncpg
import pytest

from cairn.delivery.consumer import BatchHandlers, Delivery, PerEvent
from cairn.events import Event, ResetBoundary, SessionCreated, SessionForked, TranscriptAppended
from cairn.indexer.handlers import IndexerProjection
from cairn.indexer.memory_handlers import MemoryTranscripts, build_memory_handlers
from cairn.indexer.store import MESSAGE_COLUMNS
from cairn.memindex import LocalEmbedder, MemoryIndex, MemoryIndexSettings, store
from cairn.storage.postgres import tenant_transaction, tenants_transaction
from cairn.text import build_query
from tests.integration.test_search_keys import plans_of_every_statement

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


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


def memory_scenario(tenant: str) -> list[list[Event]]:
    """Transcript events for the memory consumer, in three batches: remembered turns of two agents and two
    sessions, turns it does not keep (tool output, a group chat, blank text), a re-published turn, a fork's
    copy without a position, positions arriving out of order, and events that only carry a position."""

    def turn(position: int, text: str, seq: int | None, agent: str = "main", **extra: Any) -> TranscriptAppended:
        key = extra.pop("session_key", f"agent:{agent}:main")
        return TranscriptAppended(
            tenant_id=tenant, agent_id=agent, session_key=key, session_id=str(uuid.uuid5(uuid.NAMESPACE_URL,
            f"{tenant}/{key}")), position=position, reset_index=0, message_id=extra.pop("message_id", str(
            uuid.uuid4())), role=extra.pop("role", "user"), text=text, channel="api", chat_type=extra.pop(
            "chat_type", "direct"), token_estimate=1, ingest_seq=seq, occurred_at=START + timedelta(minutes=position),
            **extra,
        )  # fmt: skip

    repeated = str(uuid.uuid4())
    group = "agent:main:api:group:g1"
    return [
        [
            turn(1, "we sail to the harbour, key sk-abcdefabcdefabcdefabcdef", 30, message_id=repeated),
            turn(2, "at nine", 31, role="assistant", sender_name="Bot", external_id="m-2"),
            turn(1, "the helper remembers too", 33, agent="helper"),
            turn(3, "tool output", 32, role="tool"),
            turn(1, "a group says hello", 34, session_key=group, chat_type="group"),
            turn(1, "we sail to the harbour, key sk-abcdefabcdefabcdefabcdef", 30, message_id=repeated),
            turn(4, "   ", 35),
        ],
        [
            turn(5, "a fork's copy has no position", None),
            turn(6, "arrives after a later one", 29),
            SessionCreated(
                tenant_id=tenant,
                session_key="agent:main:dashboard:x",
                session_id=str(uuid.uuid4()),
                chat_type="direct",
                channel="dashboard",
                ingest_seq=40,
            ),
            turn(2, "the helper again", 41, agent="helper"),
        ],
        [
            turn(1, "a new session starts without a position", None, session_key="agent:main:api:direct:p1"),
            turn(2, "and gets one", 44, session_key="agent:main:api:direct:p1", role="assistant"),
            ResetBoundary(
                tenant_id=tenant,
                agent_id="helper",
                session_key="agent:helper:main",
                session_id=str(uuid.uuid4()),
                position=3,
                reason="new",
                reset_index=1,
                ingest_seq=45,
            ),
            SessionForked(
                tenant_id=tenant,
                session_key="agent:main:dashboard:y",
                session_id=str(uuid.uuid4()),
                parent_session_key="agent:main:main",
                parent_session_id=str(uuid.uuid4()),
                from_position=2,
                ingest_seq=46,
            ),
        ],
    ]


async def memory_state(admin: Any, tenant: str) -> dict[str, list[tuple[Any, ...]]]:
    """What the memory consumer left for a tenant, without the ids that differ between tenants."""
    t = uuid.UUID(tenant)
    turns = await admin.fetch(
        "SELECT agent_id, session_key, position, reset_index, role, sender_name, text, occurred_at, external_id "
        "FROM indexer.memory_turns WHERE tenant_id = $1 ORDER BY session_key, position",
        t,
    )
    pending = await admin.fetch(
        "SELECT agent_id, session_key, first_at, first_seq, due_at FROM indexer.memory_pending WHERE tenant_id = $1 "
        "ORDER BY session_key",
        t,
    )
    progress = await admin.fetch(
        "SELECT agent_id, ingest_seq FROM indexer.memory_progress WHERE tenant_id = $1 ORDER BY agent_id", t
    )
    return {name: [tuple(r) for r in rows] for name, rows in
            (("turns", turns), ("pending", pending), ("progress", progress))}  # fmt: skip


async def test_the_memory_consumer_writes_a_batch_as_its_events_one_at_a_time(projector_pool: Pool, admin: Any) -> None:
    """The set-based transcript batch against the per-event handlers, on twin tenants in the same transactions
    (so both see the same `now()`): identical turns (redacted), debounce marks and positions."""
    index = MemoryIndex(LocalEmbedder(), MemoryIndexSettings())  # no embedding on this path
    per_event, batched = PerEvent(build_memory_handlers(index), True), MemoryTranscripts(index)
    alone, together = [str(uuid.uuid4()) for _ in range(2)], [str(uuid.uuid4()) for _ in range(2)]
    scenarios = [memory_scenario(t) for t in alone], [memory_scenario(t) for t in together]
    for step in range(3):
        async with tenants_transaction(projector_pool, {*alone, *together}) as conn:
            for handlers, tenants in ((per_event, scenarios[0]), (batched, scenarios[1])):
                events = [e for batches in zip(*(s[step] for s in tenants), strict=True) for e in batches]
                unit = handlers.begin(conn, events)
                for number, event in enumerate(events, start=1):
                    assert await unit.handle(event, Delivery(number, 1, "cairn.test")) == []
                await unit.complete()
    for one, other in zip(alone, together, strict=True):
        expected = await memory_state(admin, one)
        assert await memory_state(admin, other) == expected
        assert [r[1:3] for r in expected["turns"]] == [
            ("agent:helper:main", 1), ("agent:helper:main", 2), ("agent:main:api:direct:p1", 1),
            ("agent:main:api:direct:p1", 2), ("agent:main:main", 1), ("agent:main:main", 2), ("agent:main:main", 5),
            ("agent:main:main", 6),
        ]  # fmt: skip
        assert "sk-abcdef" not in expected["turns"][4][6], "turns are redacted"
        assert [(r[1], r[3]) for r in expected["pending"]] == [
            ("agent:helper:main", 33),
            ("agent:main:api:direct:p1", 44),
            ("agent:main:main", 29),
        ]
        assert expected["progress"] == [("helper", 45), ("main", 46)]


async def test_the_memory_worker_finds_due_sessions_of_every_tenant_in_one_look(app_pool: Pool, admin: Any) -> None:
    """Most overdue first, across tenants, at most the limit in all, nothing not yet due; the table itself
    stays behind its tenant policy for the service role."""
    tenants, sessions = [uuid.uuid4() for _ in range(3)], [uuid.uuid4() for _ in range(4)]
    overdue = ["300 years", "100 years", "200 years", "-1 hour"]  # the last one is due in an hour
    for tenant, session, ago in zip([*tenants, tenants[0]], sessions, overdue, strict=True):
        await admin.execute(
            "INSERT INTO indexer.memory_pending (tenant_id, agent_id, session_id, session_key, due_at) "
            "VALUES ($1, 'main', $2, 'agent:main:main', now() - $3::text::interval)", tenant, session, ago
        )  # fmt: skip
    async with app_pool.acquire() as conn:
        first_two = await conn.fetch("SELECT tenant_id, session_id FROM indexer.due_memory_sessions(2)")
        every = await conn.fetch("SELECT tenant_id, session_id FROM indexer.due_memory_sessions(100000)")
        seen_directly = await conn.fetchval("SELECT count(*) FROM indexer.memory_pending")
    expected = [(tenants[0], sessions[0]), (tenants[2], sessions[2]), (tenants[1], sessions[1])]
    assert [(r["tenant_id"], r["session_id"]) for r in first_two] == expected[:2]
    assert [(r["tenant_id"], r["session_id"]) for r in every if r["tenant_id"] in tenants] == expected
    assert seen_directly == 0, "without a tenant the service role sees no pending session"


async def test_the_memory_worker_finds_turns_of_another_model_of_every_tenant_in_one_look(admin: Any) -> None:
    """Turns embedded by another model are found for every tenant by one statement (it was one per tenant,
    every `reembed_check_s`, whether or not anything was stale); a turn without a vector yet is not stale."""
    tenants, model = [uuid.uuid4() for _ in range(3)], f"model-{uuid.uuid4().hex[:8]}"
    for count, tenant in enumerate(tenants, start=1):
        await admin.execute("INSERT INTO ingest.tenants (tenant_id, name) VALUES ($1, 'stale turns')", tenant)
        for position in range(count + 1):
            await admin.execute(
                "INSERT INTO indexer.memory_turns (tenant_id, agent_id, session_id, position, reset_index, "
                "session_key, message_id, role, text, occurred_at, model) VALUES ($1, 'main', $2, $3, 0, "
                "'agent:main:main', $4, 'user', 'hello', now(), $5)",
                tenant, uuid.uuid5(tenant, "s"), position, uuid.uuid4(), None if position == count else "old",
            )  # fmt: skip
    plans = await plans_of_every_statement(admin)
    rows = await admin.fetch("SELECT tenant_id, agent_id, stale FROM indexer.stale_memory_agents($1)", model)
    mine = sorted((r["tenant_id"], r["stale"]) for r in rows if r["tenant_id"] in tenants)
    assert mine == sorted(zip(tenants, [1, 2, 3], strict=True))
    reading_turns = [plan for plan in plans if "memory_turns" in plan]
    assert len(reading_turns) == 1, "\n".join(reading_turns)


async def _remembering(pool: Pool, tenant: str, agent: str, remember: bool) -> None:
    async with tenant_transaction(pool, tenant) as conn:
        assert await store.save_remember(conn, uuid.UUID(tenant), agent, remember, 1) is remember


async def test_a_batch_marks_no_session_of_an_agent_that_does_not_remember(projector_pool: Pool, admin: Any) -> None:
    """Turns of an agent whose setting does not remember are kept and its position advances, but its sessions get
    no debounce mark (the worker would only drop it, and it held back the agent's memory read-your-writes); an
    agent that remembers, and one never configured, get theirs."""
    tenant = str(uuid.uuid4())
    await _remembering(projector_pool, tenant, "quiet", False)
    await _remembering(projector_pool, tenant, "main", True)
    events: list[Event] = [appended(tenant, agent, 1, f"{agent} says hello", seq=seq)
                           for seq, agent in enumerate(("quiet", "main", "fresh"), start=40)]  # fmt: skip
    await apply(projector_pool, events, MemoryTranscripts(MemoryIndex(LocalEmbedder(), MemoryIndexSettings())))
    state = await memory_state(admin, tenant)
    assert sorted(r[0] for r in state["turns"]) == ["fresh", "main", "quiet"]
    assert sorted(r[0] for r in state["pending"]) == ["fresh", "main"]
    assert state["progress"] == [("fresh", 42), ("main", 41), ("quiet", 40)]


async def test_a_batch_waits_for_an_agent_turning_remembering_on_and_marks_its_session(
    projector_pool: Pool, admin: Any
) -> None:
    """The setting is read FOR SHARE: while another transaction turns remembering on (it marks the sessions it can
    see, which do not include this batch's), the batch waits, then reads the new setting and marks the session."""
    tenant = str(uuid.uuid4())
    await _remembering(projector_pool, tenant, "main", False)
    handlers = MemoryTranscripts(MemoryIndex(LocalEmbedder(), MemoryIndexSettings()))
    async with tenant_transaction(projector_pool, tenant) as turning_on:
        assert await store.save_remember(turning_on, uuid.UUID(tenant), "main", True, 2) is True
        batch = asyncio.create_task(apply(projector_pool, [appended(tenant, "main", 1, "hello", seq=50)], handlers))
        await asyncio.sleep(0.5)
        assert not batch.done(), "the batch waits for the setting being changed"
    await asyncio.wait_for(batch, 10)
    assert [r[0] for r in (await memory_state(admin, tenant))["pending"]] == ["main"]


async def _fields(admin: Any, relation: str) -> list[tuple[str, str]]:
    rows = await admin.fetch(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = $1::regclass "
        "AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
        relation,
    )
    return [(r[0], r[1]) for r in rows]


async def test_the_row_types_a_batch_travels_in_are_the_tables_columns(admin: Any) -> None:
    """indexer.message_row and indexer.turn_row (0144) carry the written columns in the order the rows are built in,
    with the tables' types (terms as text, cast to tsvector in the statement)."""
    messages = dict(await _fields(admin, "indexer.messages"))
    expected = [(column, "text" if column == "terms" else messages[column]) for column in MESSAGE_COLUMNS]
    assert await _fields(admin, "indexer.message_row") == expected
    turns = [field for field in await _fields(admin, "indexer.memory_turns") if field[0] not in ("model", "embedding")]
    assert await _fields(admin, "indexer.turn_row") == turns
