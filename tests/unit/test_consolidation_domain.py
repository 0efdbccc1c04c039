"""Consolidation without I/O: snapshot rendering and naming, write planning, and the handlers run against
an in-memory twin of the `MemoryStore` port."""

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone

import pytest

from cairn.consolidation.domain import (
    Document,
    DocumentWrite,
    Skipped,
    WriteOutcome,
    clock,
    one_line,
    plan_write,
    render_snapshot,
    snapshot_lines,
    snapshot_path,
)
from cairn.consolidation.handlers import (
    bind,
    bind_at,
    on_compaction_imminent,
    on_memory_write_requested,
    on_reset_boundary,
)
from cairn.consolidation.store import MemoryStore, StaleDocumentError
from cairn.delivery.consumer import Delivery, PoisonEvent
from cairn.events import CompactionImminent, DocumentChanged, Event, MemoryWriteRequested, ResetBoundary
from cairn.events.documents import MAX_DOCUMENT_BYTES
from cairn.events.models import Role, TranscriptLine

TENANT = "0193f0c4-7a3e-7cc1-9b2e-5d1f3a2b4c6d"
RESET_AT = datetime(2026, 11, 30, 14, 5, 42, tzinfo=UTC)


class InMemoryStore:
    """The `MemoryStore` port over dicts, with the same version guard as the Postgres store."""

    def __init__(self) -> None:
        self.documents: dict[tuple[str, str, str], Document] = {}
        self.versions: list[tuple[str, str, DocumentWrite]] = []
        self.flushes: set[tuple[str, str, int, int]] = set()
        self.outcomes: dict[str, WriteOutcome] = {}

    async def get_document(self, tenant_id: str, agent_id: str, path: str) -> Document | None:
        return self.documents.get((tenant_id, agent_id, path))

    async def save_document(self, tenant_id: str, agent_id: str, write: DocumentWrite) -> None:
        key = (tenant_id, agent_id, write.path)
        current = self.documents.get(key)
        if (current.version if current else 0) != write.version - 1:
            raise StaleDocumentError(write.path)
        self.documents[key] = Document(write.version, write.text, write.change == "deleted")
        self.versions.append((tenant_id, agent_id, write))

    async def record_outcome(self, tenant_id: str, agent_id: str, outcome: WriteOutcome) -> None:
        self.outcomes.setdefault(outcome.request_id, outcome)

    async def record_flush_due(self, event: CompactionImminent) -> bool:
        key = (event.tenant_id, event.session_id, event.reset_index, event.cycle)
        if key in self.flushes:
            return False
        self.flushes.add(key)
        return True


def as_port(store: InMemoryStore) -> MemoryStore:
    return store  # mypy checks here that the twin keeps the port's shape


def line(role: Role, text: str, minute: int = 0) -> TranscriptLine:
    """A message at 13:`minute` UTC on the reset's day."""
    when = datetime(2026, 11, 30, 13, minute, tzinfo=UTC)
    return TranscriptLine(message_id=f"m-{role}-{minute}", role=role, text=text, occurred_at=when)


def reset(*tail: TranscriptLine, agent: str = "main") -> ResetBoundary:
    return ResetBoundary(
        tenant_id=TENANT, agent_id=agent, occurred_at=RESET_AT, session_key="agent:main:main",
        session_id="0193f0c4-0000-7000-8000-000000000001", position=42, reason="new", reset_index=1,
        closed_window_tail=tail, correlation_id="corr-1",
    )  # fmt: skip


def planned(current: Document | None, request: MemoryWriteRequested) -> DocumentWrite:
    plan = plan_write(current, request)
    assert isinstance(plan, DocumentWrite), plan
    return plan


def changes(events: Sequence[Event]) -> list[DocumentChanged]:
    assert all(isinstance(e, DocumentChanged) for e in events)
    return [e for e in events if isinstance(e, DocumentChanged)]


def write(mode: str, text: str = "", path: str = "MEMORY.md", if_match: int | None = None) -> MemoryWriteRequested:
    return MemoryWriteRequested.model_validate(
        {"tenant_id": TENANT, "path": path, "mode": mode, "text": text, "if_match": if_match}
    )


# -- snapshot content ------------------------------------------------------------------------------


def test_snapshot_keeps_user_and_assistant_text_in_order_without_commands_or_tool_output() -> None:
    tail = (
        line("user", "/new", 1),
        line("user", "where did I park?", 2),
        line("tool", "parking.lookup -> level 3", 3),
        line("assistant", "Level 3, row F.", 4),
        line("system", "compaction summary", 5),
        line("user", "  /active-memory off", 6),
        line("user", "   ", 7),
        line("assistant", "Anything else?", 8),
    )
    assert [x.text for x in snapshot_lines(tail)] == [
        "where did I park?",
        "Level 3, row F.",
        "Anything else?",
    ]


def test_snapshot_keeps_only_the_last_fifteen() -> None:
    talk = tuple(line("user" if i % 2 else "assistant", f"message {i}", i) for i in range(20))
    tail = (*talk, line("user", "/reset", 21), line("tool", "done", 22))
    assert [x.text for x in snapshot_lines(tail)] == [f"message {i}" for i in range(5, 20)]
    assert [x.text for x in snapshot_lines(tail, keep=2)] == ["message 18", "message 19"]


def test_one_line_collapses_newlines_and_escapes_nothing() -> None:
    assert one_line("first line\n\n  second *bold*\r\nthird_") == "first line second *bold* third_"


def test_clock_is_utc_and_shows_the_date_only_for_another_day() -> None:
    day = RESET_AT.date()
    assert clock(datetime(2026, 11, 30, 15, 7, tzinfo=timezone(timedelta(hours=2))), day) == "13:07"
    assert clock(datetime(2026, 11, 29, 23, 59, tzinfo=UTC), day) == "2026-11-29 23:59"


def test_rendered_snapshot_has_a_header_and_one_bullet_per_message() -> None:
    event = reset(line("user", "hello\nthere", 10), line("assistant", "hi!", 11))
    text = render_snapshot(event, snapshot_lines(event.closed_window_tail))
    assert text.startswith("# Session snapshot 2026-11-30 14:05 UTC\n")
    header = text.split("## Conversation")[0]
    assert "- **Session key**: agent:main:main\n" in header
    assert "- **Session id**: 0193f0c4-0000-7000-8000-000000000001\n" in header
    assert "- **Reason**: new\n- **Time**: 2026-11-30 14:05 UTC\n" in header
    assert text.endswith("## Conversation\n\n- **User** (13:10): hello there\n- **Assistant** (13:11): hi!\n")


def test_snapshot_path_uses_utc_minute_and_numbers_collisions() -> None:
    local = datetime(2026, 12, 1, 1, 5, 59, tzinfo=timezone(timedelta(hours=11)))
    assert snapshot_path(local) == "memory/snapshots/2026-11-30-1405.md"
    assert snapshot_path(local, 2) == "memory/snapshots/2026-11-30-1405-2.md"
    assert snapshot_path(local, 3) == "memory/snapshots/2026-11-30-1405-3.md"


# -- write planning --------------------------------------------------------------------------------


def test_put_creates_then_updates_and_append_joins_on_a_new_line() -> None:
    assert plan_write(None, write("put", "a")) == DocumentWrite("MEMORY.md", 1, "a", "created")
    assert plan_write(Document(1, "a"), write("put", "b")) == DocumentWrite("MEMORY.md", 2, "b", "updated")
    assert plan_write(Document(2, "a"), write("append", "b")) == DocumentWrite("MEMORY.md", 3, "a\nb", "updated")
    assert planned(Document(2, "a\n"), write("append", "b")).text == "a\nb"
    assert planned(Document(2, ""), write("append", "b")).text == "b"


def test_delete_leaves_a_tombstone_and_a_later_put_recreates_with_the_next_version() -> None:
    assert plan_write(Document(3, "a"), write("delete")) == DocumentWrite("MEMORY.md", 4, "", "deleted")
    assert plan_write(Document(4, "", deleted=True), write("put", "b")) == DocumentWrite("MEMORY.md", 5, "b", "created")
    assert isinstance(plan_write(Document(4, "", deleted=True), write("delete")), Skipped)
    assert isinstance(plan_write(None, write("delete")), Skipped)


def test_if_match_must_equal_the_visible_version() -> None:
    assert isinstance(plan_write(Document(2, "a"), write("put", "b", if_match=1)), Skipped)
    assert planned(Document(2, "a"), write("put", "b", if_match=2)).version == 3
    assert planned(None, write("put", "b", if_match=0)).version == 1
    assert isinstance(plan_write(Document(1, "a"), write("put", "b", if_match=0)), Skipped)


def test_unchanged_text_is_not_a_new_version() -> None:
    assert isinstance(plan_write(Document(1, "a"), write("put", "a")), Skipped)
    assert isinstance(plan_write(Document(1, "a"), write("append", "")), Skipped)


def test_skipped_writes_say_why_and_what_the_client_can_see() -> None:
    assert plan_write(Document(2, "a"), write("put", "b", if_match=1)) == Skipped(
        "conflict", 2, "if_match 1 does not match current version 2"
    )
    assert plan_write(Document(3, "", deleted=True), write("put", "b", if_match=3)) == Skipped(
        "conflict", 0, "if_match 3 does not match current version 0"
    )
    assert plan_write(Document(2, "a"), write("put", "a")) == Skipped("unchanged", 2, "text unchanged")
    assert plan_write(None, write("delete")) == Skipped("missing", 0, "document does not exist")


def test_an_append_past_the_size_limit_is_refused_with_the_size() -> None:
    almost_full = Document(1, "x" * (MAX_DOCUMENT_BYTES - 2))
    assert planned(almost_full, write("append", "y")).text.endswith("x\ny")
    refused = plan_write(almost_full, write("append", "yz"))
    assert refused == Skipped(
        "too_large", 1,
        f"the document would be {MAX_DOCUMENT_BYTES + 1} bytes in UTF-8; the limit is {MAX_DOCUMENT_BYTES} bytes",
    )  # fmt: skip


# -- handlers against the in-memory store ----------------------------------------------------------


async def test_reset_writes_a_snapshot_and_announces_it() -> None:
    store = InMemoryStore()
    event = reset(line("user", "remember the blue door", 1), line("assistant", "Noted.", 2))
    [changed] = changes(await on_reset_boundary(as_port(store), event))
    assert (changed.path, changed.version, changed.change) == (
        "memory/snapshots/2026-11-30-1405.md",
        1,
        "created",
    )
    assert (changed.tenant_id, changed.agent_id, changed.causation_id) == (TENANT, "main", event.event_id)
    assert changed.correlation_id == "corr-1"
    stored = store.documents[(TENANT, "main", changed.path)]
    assert stored.text == changed.text
    assert "- **User** (13:01): remember the blue door" in stored.text


async def test_resets_in_the_same_minute_get_numbered_paths_per_agent() -> None:
    store = InMemoryStore()
    paths = [
        changes(await on_reset_boundary(store, reset(line("user", f"hi {n}"), agent=agent)))[0].path
        for n, agent in enumerate(["main", "main", "other", "main"])
    ]
    stem = "memory/snapshots/2026-11-30-1405"
    assert paths == [f"{stem}.md", f"{stem}-2.md", f"{stem}.md", f"{stem}-3.md"]


async def test_reset_without_user_or_assistant_messages_writes_nothing() -> None:
    store = InMemoryStore()
    assert await on_reset_boundary(store, reset(line("user", "/reset"), line("tool", "ok"))) == ()
    assert await on_reset_boundary(store, reset()) == ()
    assert store.documents == {}


async def test_memory_writes_version_every_change() -> None:
    store = InMemoryStore()
    for position, request in enumerate((write("put", "a"), write("append", "b"), write("delete")), 7):
        [changed] = changes(await on_memory_write_requested(store, request, position))
        assert (changed.causation_id, changed.ingest_seq) == (request.event_id, position)
        assert store.outcomes[request.event_id] == WriteOutcome(
            request.event_id, "MEMORY.md", "applied", changed.version, changed.change, ""
        )
    assert [(w.version, w.change, w.text) for _, _, w in store.versions] == [
        (1, "created", "a"), (2, "updated", "a\nb"), (3, "deleted", ""),
    ]  # fmt: skip
    assert store.documents[(TENANT, "main", "MEMORY.md")] == Document(3, "", deleted=True)


async def test_if_match_conflict_writes_and_emits_nothing_but_its_outcome() -> None:
    store = InMemoryStore()
    await on_memory_write_requested(store, write("put", "a"), 1)
    stale = write("put", "b", if_match=7)
    assert await on_memory_write_requested(store, stale, 2) == ()
    assert store.documents[(TENANT, "main", "MEMORY.md")] == Document(1, "a")
    assert len(store.versions) == 1
    outcome = store.outcomes[stale.event_id]
    assert (outcome.outcome, outcome.version, outcome.change) == ("conflict", 1, None)


async def test_two_writes_planned_on_the_same_version_apply_one_and_refuse_the_other() -> None:
    """What concurrent PUTs with one If-Match come to, whichever consolidation replica applies them."""
    store = InMemoryStore()
    await on_memory_write_requested(store, write("put", "a"), 1)
    first, second = write("put", "mine", if_match=1), write("put", "theirs", if_match=1)
    assert len(await on_memory_write_requested(store, first, 2)) == 1
    assert await on_memory_write_requested(store, second, 3) == ()
    assert store.documents[(TENANT, "main", "MEMORY.md")] == Document(2, "mine")
    assert [store.outcomes[r.event_id].outcome for r in (first, second)] == ["applied", "conflict"]


@pytest.mark.parametrize(
    ("request_", "reason"),
    [
        (write("put", "a", path="notes/a.md"), "path must be one of MEMORY.md"),
        (write("append", "a", path="memory/../MEMORY.md"), "'..' segments"),
        (write("put", "x" * (MAX_DOCUMENT_BYTES + 1)), f"the limit is {MAX_DOCUMENT_BYTES} bytes"),
        # the wire model refuses it already (decoding fails): built here without validation, as if it had not
        (write("put", "x").model_copy(update={"text": "bell\x07"}), "control character (U+0007)"),
    ],
)
async def test_a_write_ingest_should_have_refused_is_poison(request_: MemoryWriteRequested, reason: str) -> None:
    store = InMemoryStore()
    with pytest.raises(PoisonEvent, match=re.escape(reason)):
        await on_memory_write_requested(store, request_, 1)
    assert (store.documents, store.outcomes) == ({}, {})


async def test_a_snapshot_change_carries_the_ingest_position_of_its_reset() -> None:
    event = reset(line("user", "hi")).model_copy(update={"ingest_seq": 77})
    [changed] = changes(await on_reset_boundary(InMemoryStore(), event))
    assert changed.ingest_seq == 77


async def test_compaction_marks_the_flush_due_once_and_emits_nothing() -> None:
    store = InMemoryStore()
    event = CompactionImminent(
        tenant_id=TENANT, session_key="agent:main:main", session_id="0193f0c4-0000-7000-8000-000000000001",
        cycle=2, estimated_tokens=180_000, transcript_bytes=900_000, threshold_tokens=176_000,
    )  # fmt: skip
    assert await on_compaction_imminent(store, event) == ()
    assert await on_compaction_imminent(store, event) == ()
    assert store.flushes == {(TENANT, event.session_id, 0, 2)}
    # the same cycle number in the window after a reset is another flush
    assert await on_compaction_imminent(store, event.model_copy(update={"reset_index": 1})) == ()
    assert store.flushes == {(TENANT, event.session_id, 0, 2), (TENANT, event.session_id, 1, 2)}


async def test_cron_and_incognito_sessions_get_no_flush() -> None:
    store = InMemoryStore()
    for key in ("cron:nightly", "agent:main:dashboard:incognito-5b0d3c1e-2f4a-4b6c-8d9e-0f1a2b3c4d5e"):
        event = CompactionImminent(
            tenant_id=TENANT, session_key=key, session_id="0193f0c4-0000-7000-8000-000000000002",
            cycle=0, estimated_tokens=300, transcript_bytes=1200, threshold_tokens=200,
        )  # fmt: skip
        assert await on_compaction_imminent(store, event) == ()
    assert store.flushes == set()


async def test_bind_adapts_a_store_handler_to_the_projection_signature() -> None:
    store = InMemoryStore()
    handler = bind(on_reset_boundary, store_for=lambda conn: store)
    [changed] = await handler(object(), reset(line("user", "hi")), Delivery(stream_seq=1, num_delivered=1, subject="s"))
    assert changed.type == "memory.document-changed.v1"
    assert (TENANT, "main", changed.path) in store.documents


async def test_bind_at_passes_the_stream_position() -> None:
    store = InMemoryStore()
    handler = bind_at(on_memory_write_requested, store_for=lambda conn: store)
    [changed] = await handler(object(), write("put", "a"), Delivery(stream_seq=9, num_delivered=1, subject="s"))
    assert isinstance(changed, DocumentChanged)
    assert (changed.type, changed.ingest_seq) == ("memory.document-changed.v1", 9)
