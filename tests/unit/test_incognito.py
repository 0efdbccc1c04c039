"""Incognito threads without I/O: which messages become reset boundaries, and how a history page is
read from a thread as the in-memory store returns it (windows, roles, anchors, paging)."""

import uuid
from datetime import UTC, datetime

from cairn.events import InboundMessage
from cairn.events.incognito import IncognitoEntry, IncognitoThread, StoredEntry
from cairn.ingest.incognito import entry_for
from cairn.recall.incognito_reads import IncognitoReads

AT = datetime(2026, 11, 29, 9, 30, tzinfo=UTC)
KEY = "agent:main:dashboard:incognito-1"


def test_a_users_slash_new_is_a_boundary_and_anything_else_a_message() -> None:
    reset = entry_for(InboundMessage(text="/new", message_id="a1", channel="web"))
    assert (reset.kind, reset.role, reset.text, reset.external_id) == ("reset", None, None, "a1")
    said = entry_for(InboundMessage(text="/new", role="assistant", occurred_at=AT))
    assert (said.kind, said.role, said.text, said.occurred_at) == ("message", "assistant", "/new", AT)
    assert said.message_id != reset.message_id


def _stored(position: int, window: int, role: str | None, text: str = "", kind: str = "message") -> StoredEntry:
    entry = IncognitoEntry(
        kind=kind, message_id=f"m{position}", channel="web", external_id=f"x{position}", role=role, text=text,
        occurred_at=AT, recorded_at=AT,
    )  # fmt: skip
    return StoredEntry(position, window, entry)


THREAD = IncognitoThread(
    session_key=KEY,
    session_id="s-1",
    parent_session_key=None,
    reset_index=1,
    entries=[
        _stored(1, 0, "user", "plan: Lisbon"),
        _stored(2, 0, "tool", "weather"),
        _stored(3, 1, None, kind="reset"),
        _stored(4, 1, "user", "plan: Porto"),
        _stored(5, 1, "assistant", "Porto it is"),
    ],
)
VISIBLE = ("user", "assistant")


async def test_the_thread_is_its_own_session_with_one_id() -> None:
    reads = IncognitoReads(THREAD)
    head = await reads.session("main", KEY)
    assert head is not None
    assert (head.session_id, head.reset_index) == ("s-1", 1)
    assert await reads.earlier_session("main", KEY, uuid.uuid4()) is None
    assert await IncognitoReads(None).session("main", KEY) is None


async def test_messages_newest_first_by_window_and_role_with_paging() -> None:
    reads = IncognitoReads(THREAD)
    latest = await reads.newest_messages("s-1", 1, VISIBLE, 10, 0)
    assert [m.position for m in latest] == [5, 4]
    assert [m.position for m in await reads.newest_messages("s-1", 1, VISIBLE, 1, 1)] == [4]
    assert [m.text for m in await reads.newest_messages("s-1", 0, VISIBLE, 10, 0)] == ["plan: Lisbon"]
    with_tools = await reads.newest_messages("s-1", 0, (*VISIBLE, "tool"), 10, 0)
    assert [m.role for m in with_tools] == ["tool", "user"]


async def test_a_message_id_ours_or_the_adapters_anchors_its_window() -> None:
    reads = IncognitoReads(THREAD)
    assert await reads.anchor_window("s-1", "m1") == 0
    assert await reads.anchor_window("s-1", "x4") == 1
    assert await reads.anchor_window("s-1", "nope") is None
    assert await reads.has_earlier_windows("s-1", 1, VISIBLE) is True
    assert await reads.has_earlier_windows("s-1", 0, VISIBLE) is False
