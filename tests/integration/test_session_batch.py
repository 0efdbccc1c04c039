"""The session service's set-based batch path against the plain store, on real Postgres as `cairn_app` and
as `cairn_projector`.

The same events (interleaved sessions, a re-sent message, `/new`, an idle reset, a cron session, a console
thread, compaction, a fork, agent settings changing in between) go once through the handlers on
`PostgresTranscripts`, one transaction per event, and once through `SessionProjection` as one batch in one
transaction, also with several tenants' scenarios interleaved in one batch (the same keys and adapter ids in
every tenant). Both must emit the same events and leave the same transcripts and sessions."""

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeAlias

import asyncpg
import pytest

from cairn.delivery.consumer import Delivery
from cairn.events import (
    AgentConfig,
    AgentConfigured,
    CompactionImminent,
    Event,
    InboundMessage,
    MessageReceived,
    ResetBoundary,
    ResetPolicy,
    SessionCommand,
    SessionCreated,
    SessionForked,
    TranscriptAppended,
)
from cairn.session.batched import BatchedTranscripts, Opening
from cairn.session.handlers import SessionHandlers
from cairn.session.projection import SessionProjection
from cairn.session.settings import CompactionSettings, SessionSettings
from cairn.session.store import Entry, PostgresTranscripts
from cairn.storage.postgres import tenant_transaction, tenants_transaction

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
SETTINGS = SessionSettings(compaction=CompactionSettings(context_window=2000))  # compaction at 200 tokens
START = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
K1, K2, CRON, HELPER = "agent:main:main", "agent:main:telegram:direct:7", "cron:nightly", "agent:helper:main"
THREAD, FORK = "agent:main:dashboard:thread", "agent:main:dashboard:fork"


def _say(tenant: str, key: str, text: str, minute: int, message_id: str | None, **fields: Any) -> MessageReceived:
    agent = key.split(":")[1] if key.startswith("agent:") else "main"
    message = InboundMessage(text=text, message_id=message_id, **fields)
    at = START + timedelta(minutes=minute)
    return MessageReceived(tenant_id=tenant, agent_id=agent, session_key=key, message=message, occurred_at=at)


def _configured(tenant: str, version: int, policy: ResetPolicy, window: int | None) -> AgentConfigured:
    config = AgentConfig(reset=policy, context_window=window)
    return AgentConfigured(tenant_id=tenant, version=version, config=config)


def scenario(tenant: str) -> list[Event]:
    long = "a long message that keeps the agent busy " * 20  # about 200 tokens: crosses the threshold
    return [
        _configured(tenant, 1, ResetPolicy(mode="idle", idle_minutes=60), None),
        _say(tenant, K1, "hello from main", 0, "a1"),
        _say(tenant, K2, "hi on telegram 你好", 1, "b1", channel="telegram", peer_id="7"),
        _say(tenant, K1, "second in main", 2, "a2"),
        _say(tenant, K1, "hello from main (re-sent)", 3, "a1"),
        _say(tenant, K1, "/new", 4, "a3"),
        _say(tenant, K1, "after the reset", 5, "a4", role="assistant"),
        _say(tenant, CRON, "nightly job ran", 6, "c1", channel="cron"),
        _say(tenant, K2, "back after two hours", 121, "b2", channel="telegram", peer_id="7"),
        _say(tenant, K2, "and once more", 122, "b3", channel="telegram", peer_id="7"),
        SessionCommand(
            tenant_id=tenant, command="create", session_key=THREAD, session_id=str(uuid.uuid4()), channel="dashboard"
        ),
        _say(tenant, THREAD, "in the console thread", 123, "d1", channel="dashboard"),
        _say(tenant, K1, long, 124, "a5"),
        _say(tenant, K1, long, 125, "a6"),
        _say(tenant, HELPER, "the helper agent", 126, None),
        SessionCommand(
            tenant_id=tenant,
            command="fork",
            session_key=FORK,
            session_id=str(uuid.uuid4()),
            parent_session_key=K1,
            channel="dashboard",
        ),
        _say(tenant, K1, "after the fork", 127, "a7"),
        _configured(tenant, 2, ResetPolicy(mode="none"), 1000),
        _say(tenant, K1, "after the new settings", 300, "a8"),
        _say(tenant, K1, "no adapter id", 301, None),
        _say(tenant, K1, "/active-memory off", 302, "a9"),  # switches, never stored (K1 ends off)
        _say(tenant, K2, "/Active-Memory OFF", 303, "b4", channel="telegram", peer_id="7"),
        _say(tenant, K2, "between the switches", 304, "b5", channel="telegram", peer_id="7"),
        _say(tenant, K2, "/active-memory status", 305, "b6", channel="telegram", peer_id="7"),
        _say(tenant, K2, "/active-memory on", 306, "b7", channel="telegram", peer_id="7"),  # K2 ends on
        _say(tenant, "agent:main:telegram:direct:8", "/active-memory off", 307, "e1", channel="telegram", peer_id="8"),
    ]


async def run_plain(pool: Pool, events: Sequence[Event]) -> list[list[Event]]:
    """One transaction per event on the plain store, as the projection applies a lone event."""
    handlers, emitted = SessionHandlers(SETTINGS), []
    for seq, event in enumerate(events, start=1):
        async with tenant_transaction(pool, event.tenant_id) as conn:
            store = PostgresTranscripts(conn)
            if isinstance(event, MessageReceived):
                emitted.append(await handlers.on_message(store, event, seq))
            elif isinstance(event, SessionCommand):
                emitted.append(await handlers.on_command(store, event, seq))
            else:
                assert isinstance(event, AgentConfigured)
                emitted.append(await handlers.on_configured(store, event))
    return emitted


async def run_across(pool: Pool, scenarios: Sequence[Sequence[Event]], first: int = 0) -> list[list[list[Event]]]:
    """Several tenants' events interleaved (each tenant's in order) as one batch in one transaction; each
    event carries the position it has in its own tenant's sequence, so the outcome compares with `run_plain`."""
    order = sorted(((i, n) for n, events in enumerate(scenarios) for i in range(len(events))))
    emitted: list[list[list[Event]]] = [[] for _ in scenarios]
    async with tenants_transaction(pool, [events[0].tenant_id for events in scenarios]) as conn:
        unit = SessionProjection(SETTINGS).begin(conn, [scenarios[n][i] for i, n in order])
        for i, n in order:
            delivery = Delivery(first + i + 1, 1, "cairn.test")
            emitted[n].append(list(await unit.handle(scenarios[n][i], delivery)))
        await unit.complete()
    return emitted


async def run_batched(pool: Pool, events: Sequence[Event], first_seq: int = 1) -> list[list[Event]]:
    """Events as one tenant's group of one fetched batch: one unit, one transaction."""
    emitted = []
    async with tenant_transaction(pool, events[0].tenant_id) as conn:
        unit = SessionProjection(SETTINGS).begin(conn, events)
        for seq, event in enumerate(events, start=first_seq):
            emitted.append(list(await unit.handle(event, Delivery(seq, 1, "cairn.test"))))
        await unit.complete()
    return emitted


def _shape(event: Event) -> tuple[Any, ...]:
    """What an emitted event says, without the ids that differ between two runs."""
    if isinstance(event, TranscriptAppended):
        return ("appended", event.session_key, event.position, event.reset_index, event.role, event.text,
                event.external_id, event.token_estimate, event.ingest_seq, event.occurred_at)  # fmt: skip
    if isinstance(event, ResetBoundary):
        tail = tuple(line.text for line in event.closed_window_tail)
        return ("reset", event.session_key, event.position, event.reason, event.reset_index, tail, event.ingest_seq)
    if isinstance(event, CompactionImminent):
        return ("compaction", event.session_key, event.cycle, event.estimated_tokens, event.threshold_tokens)
    if isinstance(event, SessionForked):
        return ("forked", event.session_key, event.from_position, event.ingest_seq)
    assert isinstance(event, SessionCreated)
    return ("created", event.session_key, event.chat_type, event.channel, event.ingest_seq)


async def stored(pool: Pool, tenant: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every entry (by key, and by which of the key's sessions holds it) and every session row."""
    async with tenant_transaction(pool, tenant) as conn:
        entries = await conn.fetch(
            """SELECT k.session_key, e.session_id, e.position, e.kind, e.role, e.text, e.external_id, e.reset_index,
                      e.token_estimate, e.occurred_at, e.ingest_seq, e.channel
               FROM session.entries e JOIN session.key_sessions k USING (tenant_id, session_id)
               ORDER BY k.session_key, e.ingest_seq, e.position"""
        )
        sessions = await conn.fetch(
            """SELECT session_key, agent_id, chat_type, channel, status, last_position, reset_index, window_tokens,
                      window_bytes, compaction_cycle, compaction_flagged, message_count, last_activity_at,
                      parent_session_id IS NOT NULL AS has_parent, active_memory
               FROM session.sessions ORDER BY session_key"""
        )
    order: dict[str, int] = {}  # a key's sessions numbered in the order they were written to
    for row in entries:
        order.setdefault(str(row["session_id"]), sum(1 for s in order if s.startswith(row["session_key"])))
    named = [(r["session_key"], order[str(r["session_id"])], *tuple(r)[2:]) for r in entries]
    return named, [tuple(r) for r in sessions]


async def test_a_batch_leaves_what_one_event_at_a_time_leaves(app_pool: Pool) -> None:
    plain_tenant, batch_tenant = str(uuid.uuid4()), str(uuid.uuid4())
    plain = await run_plain(app_pool, scenario(plain_tenant))
    batched = await run_batched(app_pool, scenario(batch_tenant))

    assert [[_shape(e) for e in out] for out in batched] == [[_shape(e) for e in out] for out in plain]
    kinds = {type(e).__name__ for out in plain for e in out}
    assert kinds == {"TranscriptAppended", "ResetBoundary", "SessionCreated", "CompactionImminent", "SessionForked"}
    assert plain[4] == [], "the re-sent message is stored once"
    assert [e.reason for e in plain[8] if isinstance(e, ResetBoundary)] == ["idle"]
    assert await stored(app_pool, batch_tenant) == await stored(app_pool, plain_tenant)
    _, sessions = await stored(app_pool, batch_tenant)
    switched = {row[0]: row[-1] for row in sessions}
    assert (switched[K1], switched[K2], switched["agent:main:telegram:direct:8"]) == (False, True, False)
    entries, _ = await stored(app_pool, batch_tenant)
    assert not [e for e in entries if "/active-memory" in (e[5] or "").lower()], "commands are never stored"


async def test_batches_continue_what_earlier_batches_wrote(app_pool: Pool) -> None:
    plain_tenant, batch_tenant = str(uuid.uuid4()), str(uuid.uuid4())
    plain = await run_plain(app_pool, [*scenario(plain_tenant), _say(plain_tenant, K1, "re-sent", 302, "a1")])
    events = [*scenario(batch_tenant), _say(batch_tenant, K1, "re-sent", 302, "a1")]
    batched = []
    for start, end in ((0, 3), (3, 9), (9, 16), (16, len(events))):
        batched += await run_batched(app_pool, events[start:end], first_seq=start + 1)

    assert batched[-1] == [], "an adapter id stored by an earlier batch is still a re-send"
    assert [[_shape(e) for e in out] for out in batched] == [[_shape(e) for e in out] for out in plain]
    assert await stored(app_pool, batch_tenant) == await stored(app_pool, plain_tenant)


async def test_one_batch_of_several_tenants_leaves_what_each_tenant_alone_leaves(
    app_pool: Pool, projector_pool: Pool, admin: Any
) -> None:
    plain_tenant = str(uuid.uuid4())
    plain = await run_plain(app_pool, scenario(plain_tenant))
    tenants = [str(uuid.uuid4()) for _ in range(3)]
    batched = await run_across(projector_pool, [scenario(tenant) for tenant in tenants])

    expected = await stored(app_pool, plain_tenant)
    for tenant, emitted in zip(tenants, batched, strict=True):
        assert [[_shape(e) for e in out] for out in emitted] == [[_shape(e) for e in out] for out in plain]
        assert {e.tenant_id for out in emitted for e in out} == {tenant}
        assert await stored(app_pool, tenant) == expected
    writers = await admin.fetch(
        "SELECT DISTINCT xmin::text FROM session.entries WHERE tenant_id = ANY($1::uuid[])",
        [uuid.UUID(t) for t in tenants],
    )
    assert len(writers) > 0
    assert {r["xmin"] for r in writers} == {writers[0]["xmin"]}, "every tenant's entries come from one transaction"


async def test_batches_of_several_tenants_continue_what_earlier_batches_wrote(
    app_pool: Pool, projector_pool: Pool
) -> None:
    plain_tenant = str(uuid.uuid4())
    plain = await run_plain(app_pool, [*scenario(plain_tenant), _say(plain_tenant, K1, "re-sent", 302, "a1")])
    tenants = [str(uuid.uuid4()) for _ in range(2)]
    scenarios = [[*scenario(t), _say(t, K1, "re-sent", 302, "a1")] for t in tenants]
    batched: list[list[list[Event]]] = [[] for _ in tenants]
    for start, end in ((0, 3), (3, 9), (9, 16), (16, len(scenarios[0]))):
        for n, out in enumerate(await run_across(projector_pool, [s[start:end] for s in scenarios], first=start)):
            batched[n] += out

    for tenant, emitted in zip(tenants, batched, strict=True):
        assert emitted[-1] == [], "an adapter id stored by an earlier batch is still a re-send"
        assert [[_shape(e) for e in out] for out in emitted] == [[_shape(e) for e in out] for out in plain]
        assert await stored(app_pool, tenant) == await stored(app_pool, plain_tenant)


async def test_an_incognito_message_in_a_batch_leaves_no_row_at_all(app_pool: Pool) -> None:
    """Ingest never publishes incognito traffic; should some arrive in a run of messages, neither the
    prefetch nor the handler writes anything for it."""
    tenant, incognito = str(uuid.uuid4()), f"agent:main:dashboard:incognito-{uuid.uuid4()}"
    events: list[Event] = [
        _say(tenant, K1, "before", 0, "n1"),
        _say(tenant, incognito, "never stored", 1, "n2", channel="dashboard"),
        _say(tenant, K1, "after", 2, "n3"),
    ]
    emitted = await run_batched(app_pool, events)
    assert emitted[1] == []
    entries, sessions = await stored(app_pool, tenant)
    assert [s[0] for s in sessions] == [K1]
    assert [e[5] for e in entries] == ["before", "after"]


async def test_open_many_creates_locks_and_finds_adapter_ids_of_the_transactions_tenants_only(
    projector_pool: Pool, admin: Any
) -> None:
    """`session.open_many` (0055), the prefetch's one statement: new keys get a session (remembered in
    key_sessions, reported `created`), existing ones come back as they are with their agent's settings, every
    returned session is locked by the caller, and the stored adapter ids are found — for the tenants of the
    transaction only (row-level security applies as to the statements it replaced)."""
    first, second, outsider = (str(uuid.uuid4()) for _ in range(3))
    async with tenants_transaction(projector_pool, [first, second]) as conn:  # an existing session with an entry
        batch = BatchedTranscripts(conn)
        await batch.prefetch([Opening(first, "main", K1, "direct", "telegram")], [])
        session = await batch.open_session(first, "main", K1, "direct", "telegram")
        entry = Entry("message", "telegram", "x1", START, START, 1, "user", "hi", token_estimate=1)
        await batch.append(first, session, entry)
        await batch.flush()
        await PostgresTranscripts(conn).save_agent_settings(
            first, "main", 1, AgentConfig(reset=ResetPolicy(mode="idle", idle_minutes=5), context_window=4000)
        )
    async with tenant_transaction(projector_pool, outsider) as conn:  # the same adapter id in another tenant
        await PostgresTranscripts(conn).append(
            outsider, await PostgresTranscripts(conn).open_session(outsider, "main", K2, "direct", "telegram"),
            Entry("message", "telegram", "x2", START, START, 1, "user", "elsewhere"),
        )  # fmt: skip

    keys = [(second, "main", K2), (first, "main", K1), (second, "main", K1)]
    externals = [(first, "telegram", "x1"), (second, "telegram", "x1"), (first, "telegram", "x2"),
                 (outsider, "telegram", "x2")]  # fmt: skip
    new_ids = [uuid.uuid4() for _ in keys]
    async with tenants_transaction(projector_pool, [first, second]) as conn:
        rows = await conn.fetch(
            "SELECT * FROM session.open_many($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            [uuid.UUID(k[0]) for k in keys], [k[1] for k in keys], [k[2] for k in keys], new_ids,
            ["group", "direct", "direct"], ["slack", "telegram", "telegram"],
            [uuid.UUID(e[0]) for e in externals], [e[1] for e in externals], [e[2] for e in externals],
        )  # fmt: skip
        locked = [r for r in rows if r["session_id"] is not None]
        found = [(str(r["tenant_id"]), r["channel"], r["external_id"]) for r in rows if r["session_id"] is None]
        with pytest.raises(asyncpg.LockNotAvailableError):  # the caller holds every returned row's lock
            async with admin.transaction():
                await admin.execute(
                    "SELECT 1 FROM session.sessions WHERE tenant_id = ANY($1::uuid[]) FOR UPDATE NOWAIT",
                    [uuid.UUID(first), uuid.UUID(second)],
                )

    holders = await admin.fetch(
        """SELECT s.tenant_id, s.session_key FROM session.sessions s
           WHERE s.tenant_id = ANY($1::uuid[]) ORDER BY 1, 2""",
        [uuid.UUID(first), uuid.UUID(second)],
    )
    by_key = {(str(r["tenant_id"]), r["session_key"]): r for r in locked}
    assert list(by_key) == sorted(by_key), "locked in key order"
    assert set(by_key) == {(second, K2), (first, K1), (second, K1)}
    old = by_key[(first, K1)]
    assert (old["created"], old["session_id"], old["last_position"]) == (False, uuid.UUID(session.session_id), 1)
    assert (old["context_window"], old["window_tokens"], old["chat_type"]) == (4000, 1, "direct")
    assert '"idle"' in old["reset_policy"]
    for tenant, key, new_id, chat_type in ((second, K2, new_ids[0], "group"), (second, K1, new_ids[2], "direct")):
        row = by_key[(tenant, key)]
        assert (row["created"], row["session_id"], row["last_position"], row["chat_type"]) == (
            True, new_id, 0, chat_type
        )  # fmt: skip
        assert row["context_window"] is None
    assert [(str(r["tenant_id"]), r["session_key"]) for r in holders] == sorted(
        [(first, K1), (second, K1), (second, K2)]
    )
    remembered = await admin.fetch(
        "SELECT tenant_id, session_key, session_id FROM session.key_sessions WHERE tenant_id = ANY($1::uuid[])",
        [uuid.UUID(second), uuid.UUID(outsider)],
    )
    assert {(str(r["tenant_id"]), r["session_key"], r["session_id"]) for r in remembered} == {
        (second, K2, new_ids[0]), (second, K1, new_ids[2]),
        (outsider, K2, (await admin.fetchval(
            "SELECT session_id FROM session.sessions WHERE tenant_id = $1", uuid.UUID(outsider)))),
    }  # fmt: skip
    assert found == [(first, "telegram", "x1")], "the outsider's x2 is not seen, nor first's x1 in second"
    outsider_rows = await admin.fetchval(
        "SELECT count(*) FROM session.sessions WHERE tenant_id = $1", uuid.UUID(outsider)
    )
    assert outsider_rows == 1, "no session was created for a tenant outside the set"
