"""`BatchedTranscripts` against a connection that records its statements: what a batch sends, no I/O.

The rows and events a batch leaves are compared with the plain store's on Postgres in
tests/integration/test_session_batch.py; these tests pin down how the values travel.
"""

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from cairn.events import InboundMessage, MessageReceived
from cairn.session import batched
from cairn.session.batched import FLUSH, OPEN_MANY, BatchedTranscripts, Opening
from cairn.session.handlers import SessionHandlers
from cairn.session.projection import _Batch
from cairn.session.settings import SessionSettings
from cairn.session.store import Entry, SessionRow

TENANT = str(uuid.uuid4())
SESSION = str(uuid.uuid4())
KEY = "agent:main:main"
AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


class RecordingConnection:
    """Answers `session.open_many` with one existing session; records every statement and its arguments."""

    def __init__(self, created: bool = False) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.created = created

    async def fetch(self, query: str, *args: Any) -> list[dict[str, Any]]:
        self.calls.append((query, args))
        assert query == OPEN_MANY
        return [{
            "tenant_id": uuid.UUID(TENANT), "agent_id": "main", "session_key": KEY, "session_id": uuid.UUID(SESSION),
            "created": self.created, "last_position": 4, "reset_index": 1, "window_tokens": 10, "window_bytes": 40,
            "compaction_flagged": False, "compaction_cycle": 0, "context_window": None, "reset_policy": None,
            "reset_by_type": None, "chat_type": "direct", "compaction": None, "last_activity_at": AT,
            "channel": None, "external_id": None,
        }]  # fmt: skip

    async def execute(self, query: str, *args: Any) -> str:
        self.calls.append((query, args))
        return "UPDATE 1"


def _message(text: str, external_id: str) -> Entry:
    return Entry("message", "web", external_id, AT, AT, 7, "user", text, None, None, len(text) // 4, True)


async def _batch_of_two(created: bool = False) -> tuple[RecordingConnection, list[tuple[int, str]], list[bool]]:
    conn = RecordingConnection(created)
    store = BatchedTranscripts(conn)
    await store.prefetch([Opening(TENANT, "main", KEY, "direct", "web")], [(TENANT, "web", "a"), (TENANT, "web", "b")])
    appended, opened = [], []
    for text, external_id in (("hello there", "a"), ("how are you", "b")):
        session = await store.open_session(TENANT, "main", KEY, "direct", "web")
        opened.append(session.created)
        appended.append(await store.append(TENANT, session, _message(text, external_id)))
    await store.flush()
    return conn, appended, opened


async def test_ids_travel_as_text_and_message_ids_are_new_random_uuids() -> None:
    """asyncpg's uuid codec takes text (parsed in C), so no uuid.UUID is built per value; message ids are v4."""
    conn, appended, _ = await _batch_of_two()
    (open_many, opened), (flush, written) = conn.calls
    assert (open_many, flush) == (OPEN_MANY, FLUSH)
    assert (opened[0], opened[6]) == ([TENANT], [TENANT, TENANT])
    assert all(isinstance(new_id, str) and uuid.UUID(new_id).version == 4 for new_id in opened[3])
    entries = written[0]  # one record per entry, in session.entry_row's column order (0132)
    assert all(isinstance(entry, tuple) and len(entry) == 16 for entry in entries)
    tenants, sessions, positions, _, message_ids = ([entry[i] for entry in entries] for i in range(5))
    assert (tenants, sessions, positions) == ([TENANT, TENANT], [SESSION, SESSION], [5, 6])
    assert message_ids == [message_id for _, message_id in appended]
    assert all(isinstance(m, str) and str(uuid.UUID(m)) == m and uuid.UUID(m).version == 4 for m in message_ids)
    assert len(set(message_ids)) == 2
    assert written[1:3] == ([TENANT], [SESSION])


async def test_the_session_advances_by_each_message_it_appends() -> None:
    """Each open after an append sees the window the append left; the flush writes the last state."""
    conn, appended, _ = await _batch_of_two()
    assert [position for position, _ in appended] == [5, 6]
    written = conn.calls[1][1]
    last_position, reset_index, tokens, size, flagged, active, messages = written[3:]
    assert (last_position, reset_index, flagged, active, messages) == ([6], [1], [False], [AT], [2])
    assert tokens == [10 + len("hello there") // 4 + len("how are you") // 4]
    assert size == [40 + len("hello there") + len("how are you")]


async def test_a_created_session_is_reported_created_once() -> None:
    assert (await _batch_of_two(created=True))[2] == [True, False]
    assert (await _batch_of_two(created=False))[2] == [False, False]


async def test_messages_to_an_existing_session_copy_its_row_no_more_than_once_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`dataclasses.replace` of the 12-field frozen row was two copies per message (open, then append)."""
    built: list[SessionRow] = []

    def build(*args: Any, **fields: Any) -> SessionRow:
        built.append(SessionRow(*args, **fields))
        return built[-1]

    monkeypatch.setattr(batched, "replace", lambda *a, **k: pytest.fail("a row copied by dataclasses.replace"))
    monkeypatch.setattr(batched, "SessionRow", build)
    store = BatchedTranscripts(RecordingConnection())
    store._rows = {SESSION: SessionRow(SESSION, 4, 1, 10, 40, False, 0, False)}
    store._keys = {(TENANT, "main", KEY): SESSION}
    store._tenants = {SESSION: TENANT}
    for text in ("one", "two", "three"):
        session = await store.open_session(TENANT, "main", KEY, "direct", "web")
        await store.append(TENANT, session, _message(text, text))
    assert len(built) == 3


class OpeningsOnly(BatchedTranscripts):
    """Records what a run of messages prefetches, and nothing else."""

    def __init__(self) -> None:
        super().__init__(RecordingConnection())
        self.prefetched: list[tuple[list[Opening], list[tuple[str, str, str]]]] = []

    async def prefetch(self, openings: list[Opening], external_ids: list[tuple[str, str, str]]) -> None:
        self.prefetched.append((openings, external_ids))


def _received(key: str, channel: str, chat_type: str, message_id: str) -> MessageReceived:
    chat_id = None if chat_type == "direct" else "-100"
    message = InboundMessage(text="hi", message_id=message_id, channel=channel, chat_type=chat_type, chat_id=chat_id)
    return MessageReceived(tenant_id=TENANT, session_key=key, message=message, occurred_at=AT)


async def test_a_run_of_messages_prefetches_one_opening_per_session_with_its_last_messages_values() -> None:
    """What `prefetch` kept of several openings of one key (the last one's values, in first-mention order),
    now without building one per message."""
    other = "agent:main:web:direct:9"
    events = [
        _received(KEY, "web", "direct", "a"),
        _received(other, "web", "direct", "b"),
        _received(KEY, "telegram", "group", "c"),
        _received("agent:main:dashboard:incognito-1", "web", "direct", "d"),
    ]
    store = OpeningsOnly()
    batch = _Batch(SessionHandlers(SessionSettings()), store, events)
    await batch._prefetch(0)
    assert store.prefetched == [(
        [Opening(TENANT, "main", KEY, "group", "telegram"), Opening(TENANT, "main", other, "direct", "web")],
        [(TENANT, "web", "a"), (TENANT, "web", "b"), (TENANT, "telegram", "c")],
    )]  # fmt: skip
