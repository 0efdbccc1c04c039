"""The session handlers against an in-memory twin of the `Transcripts` port: no I/O."""

import uuid
from dataclasses import replace
from datetime import UTC, datetime

from cairn.events import (
    CompactionImminent,
    InboundMessage,
    MessageReceived,
    ResetBoundary,
    SessionCommand,
    SessionCreated,
    TranscriptAppended,
)
from cairn.events.models import TranscriptLine
from cairn.session.handlers import SessionHandlers
from cairn.session.settings import CompactionSettings, SessionSettings
from cairn.session.store import Entry, SessionRow

TENANT = str(uuid.uuid4())
KEY = "agent:main:main"


class InMemoryTranscripts:
    """The port's contract in 40 lines: sessions by key, entries by session, external ids per channel."""

    def __init__(self) -> None:
        self.sessions: dict[str, SessionRow] = {}
        self.entries: dict[str, list[tuple[int, Entry, int]]] = {}

    async def open_session(self, tenant: str, agent: str, key: str, chat_type: str, channel: str) -> SessionRow:
        if key in self.sessions:
            return replace(self.sessions[key], created=False)
        row = SessionRow(str(uuid.uuid4()), 0, 0, 0, 0, False, 0, True)
        self.sessions[key] = row
        self.entries[row.session_id] = []
        return row

    async def has_external_id(self, tenant: str, channel: str, external_id: str | None) -> bool:
        return external_id is not None and any(
            e.channel == channel and e.external_id == external_id for rows in self.entries.values() for _, e, _ in rows
        )

    def _key_of(self, session_id: str) -> str:
        return next(k for k, s in self.sessions.items() if s.session_id == session_id)

    async def append(self, tenant: str, session: SessionRow, entry: Entry) -> tuple[int, str]:
        key, position = self._key_of(session.session_id), session.last_position + 1
        current = self.sessions[key]
        if entry.kind == "reset":
            self.sessions[key] = replace(
                current,
                last_position=position,
                reset_index=current.reset_index + 1,
                window_tokens=0,
                window_bytes=0,
                compaction_flagged=False,
            )
        else:
            self.sessions[key] = replace(
                current,
                last_position=position,
                window_tokens=current.window_tokens + entry.token_estimate,
                window_bytes=current.window_bytes + len((entry.text or "").encode()),
            )
        self.entries[session.session_id].append((position, entry, self.sessions[key].reset_index))
        return position, str(uuid.uuid4())

    async def flag_compaction(self, tenant: str, session: SessionRow) -> None:
        key = self._key_of(session.session_id)
        self.sessions[key] = replace(self.sessions[key], compaction_flagged=True)

    async def window_tail(self, tenant: str, session: SessionRow, limit: int) -> tuple[TranscriptLine, ...]:
        lines = [
            TranscriptLine(message_id=str(p), role=e.role, text=e.text or "", occurred_at=e.occurred_at)
            for p, e, window in self.entries[session.session_id]
            if window == session.reset_index
            and e.kind == "message"
            and e.role in ("user", "assistant")
            and not (e.text or "").lstrip().startswith("/")
        ]
        return tuple(lines[-limit:])


def _received(text: str, message_id: str | None = None, role: str = "user") -> MessageReceived:
    message = InboundMessage(text=text, message_id=message_id, role=role, channel="telegram")
    return MessageReceived(
        tenant_id=TENANT, session_key=KEY, message=message, occurred_at=datetime(2026, 11, 29, 9, 30, tzinfo=UTC)
    )


def _handlers(context_window: int = 200_000) -> SessionHandlers:
    return SessionHandlers(SessionSettings(compaction=CompactionSettings(context_window=context_window)))


async def test_first_message_creates_the_session_and_appends_at_position_one() -> None:
    store = InMemoryTranscripts()
    emitted = await _handlers().on_message(store, _received("hello there"), ingest_seq=7)
    assert [type(e) for e in emitted] == [SessionCreated, TranscriptAppended]
    appended = emitted[1]
    assert isinstance(appended, TranscriptAppended)
    assert (appended.position, appended.reset_index, appended.ingest_seq) == (1, 0, 7)
    assert appended.occurred_at == datetime(2026, 11, 29, 9, 30, tzinfo=UTC)
    assert appended.causation_id == emitted[0].causation_id


async def test_positions_are_consecutive_and_a_resent_message_id_is_stored_once() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    first = await handlers.on_message(store, _received("one", "m-1"), 1)
    second = await handlers.on_message(store, _received("two", "m-2"), 2)
    again = await handlers.on_message(store, _received("one", "m-1"), 3)
    assert [e.position for e in [*first, *second] if isinstance(e, TranscriptAppended)] == [1, 2]
    assert again == []
    assert len(store.entries[store.sessions[KEY].session_id]) == 2


async def test_slash_new_records_a_boundary_with_the_closed_window_tail_and_keeps_the_id() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    for i in range(20):
        await handlers.on_message(store, _received(f"line {i}", f"m{i}"), i)
    await handlers.on_message(store, _received("/status", "cmd"), 20)
    session_id = store.sessions[KEY].session_id
    emitted = await handlers.on_message(store, _received("/new", "reset-1"), 21)
    assert len(emitted) == 1
    boundary = emitted[0]
    assert isinstance(boundary, ResetBoundary)
    assert (boundary.session_id, boundary.reason, boundary.reset_index, boundary.position) == (session_id, "new", 1, 22)
    assert [line.text for line in boundary.closed_window_tail] == [f"line {i}" for i in range(5, 20)]
    after = await handlers.on_message(store, _received("fresh start", "m-after"), 22)
    appended = next(e for e in after if isinstance(e, TranscriptAppended))
    assert (appended.session_id, appended.reset_index, appended.position) == (session_id, 1, 23)
    assert await handlers.on_message(store, _received("/new", "reset-1"), 23) == []  # the same /new re-sent


async def test_assistant_slash_text_is_a_message_not_a_reset() -> None:
    emitted = await _handlers().on_message(InMemoryTranscripts(), _received("/new is a command", role="assistant"), 1)
    assert any(isinstance(e, TranscriptAppended) for e in emitted)


async def test_api_reset_of_a_key_without_a_session_creates_one() -> None:
    store = InMemoryTranscripts()
    command = SessionCommand(tenant_id=TENANT, command="reset", session_key="agent:main:dashboard:x", reason="api")
    emitted = await _handlers().on_command(store, command, 5)
    assert [type(e) for e in emitted] == [SessionCreated, ResetBoundary]


async def test_compaction_imminent_fires_once_per_cycle_and_again_after_a_reset() -> None:
    store, handlers = InMemoryTranscripts(), _handlers(context_window=2000)  # threshold: 200 tokens
    fired = []
    for i in range(40):  # ~25 tokens each: crosses once
        fired += [
            e
            for e in await handlers.on_message(store, _received("x" * 100, f"a{i}"), i)
            if isinstance(e, CompactionImminent)
        ]
    assert len(fired) == 1
    assert fired[0].threshold_tokens == 200
    await handlers.on_message(store, _received("/reset", "r"), 40)
    for i in range(40):
        fired += [
            e
            for e in await handlers.on_message(store, _received("x" * 100, f"b{i}"), 41 + i)
            if isinstance(e, CompactionImminent)
        ]
    assert len(fired) == 2
