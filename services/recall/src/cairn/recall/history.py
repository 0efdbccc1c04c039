"""Pure rules of session history and listing: which window to show, how text and pages are capped,
and the opaque listing cursor. No I/O; the route reads rows and hands them here."""

import base64
import binascii
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, Field

from cairn.events.fields import name_problem, time_problem
from cairn.text import redact

TEXT_CHARS = 4000
RESPONSE_BYTES = 80 * 1024
VISIBLE_ROLES = ("user", "assistant")
ALL_ROLES = ("user", "assistant", "tool", "system")


class HistoryMessage(BaseModel):
    message_id: str = Field(
        description="the id the message was written with (API.md): the adapter's, else cairn's; either opens its window"
    )
    cairn_message_id: str = Field(description="cairn's id of the message, unique in the tenant")
    external_id: str | None = Field(default=None, description="the adapter's message id, when it sent one")
    role: str
    sender_name: str | None
    text: str = Field(description="redacted, at most 4000 characters, or an omission marker")
    occurred_at: datetime = Field(description="when it was said (event time)")
    recorded_at: datetime = Field(description="when cairn stored it")
    position: int = Field(description="the entry's place in the session's transcript")
    truncated: bool = Field(description="the text was cut to 4000 characters or replaced by a marker")


class HistoryWindow(BaseModel):
    reset_index: int = Field(description="the window shown: 0 before the first reset, +1 per reset")
    has_earlier_windows: bool = Field(description="messages exist in windows before this one")


class HistoryPage(BaseModel):
    session_key: str
    session_id: str
    messages: list[HistoryMessage] = Field(description="oldest first")
    window: HistoryWindow
    truncated: bool = Field(description="a text was capped or the 80 KB response limit cut the page short")
    has_more: bool = Field(description="older messages of this window remain; ask again with `next_offset`")
    next_offset: int | None
    indexing: bool = Field(
        default=False, description="`consistent_with` was not reached within the bound: this is what is stored so far"
    )
    bytes: int = Field(description="size of this JSON response in bytes (the last field)")


@dataclass(frozen=True)
class StoredMessage:
    """A message entry of a transcript as it is stored (unredacted, uncapped)."""

    message_id: str
    role: str
    sender_name: str | None
    text: str
    occurred_at: datetime
    recorded_at: datetime
    position: int
    external_id: str | None = None


def roles_shown(include_tools: bool) -> tuple[str, ...]:
    """Tool output and system entries are hidden unless asked for."""
    return ALL_ROLES if include_tools else VISIBLE_ROLES


def choose_window(current: int, anchor: int | None) -> int:
    """The latest window unless a message of an earlier (or the same) window anchors the read."""
    if anchor is None:
        return current
    return min(anchor, current)


def cap_text(text: str, limit: int = TEXT_CHARS) -> tuple[str, bool]:
    """Redact first, so a cut can never expose the half of a secret that a mask would have hidden.

    Redaction costs up to ~1 ms per 3 KB, so only a head of `limit` characters plus a margin twice as
    long is redacted: every secret shape fits in that margin except a quoted value longer than it. When
    masks shrink the head by half the margin, text from past the head could move into view, so the
    whole text is redacted instead.
    """
    margin = 2 * limit
    head = text[: limit + margin]
    clean = redact(head)
    if len(head) < len(text) and len(clean) < limit + margin // 2:
        clean = redact(text)
    if len(clean) <= limit:
        return clean, False
    return clean[:limit], True


def omitted_marker(size: int) -> str:
    return f"[message omitted: {math.ceil(size / 1024)} KB over the response limit]"


def to_message(stored: StoredMessage, text_chars: int = TEXT_CHARS) -> HistoryMessage:
    text, truncated = cap_text(stored.text, text_chars)
    sender = redact(stored.sender_name) if stored.sender_name is not None else None
    return HistoryMessage(
        message_id=stored.external_id or stored.message_id,
        cairn_message_id=stored.message_id,
        external_id=stored.external_id,
        role=stored.role,
        sender_name=sender,
        text=text,
        occurred_at=stored.occurred_at,
        recorded_at=stored.recorded_at,
        position=stored.position,
        truncated=truncated,
    )


def json_size(model: BaseModel) -> int:
    return len(model.model_dump_json().encode())


@dataclass(frozen=True)
class Fitted:
    """The newest messages that fit the byte budget (newest first) and whether anything was cut."""

    kept: list[HistoryMessage]
    deferred: bool  # rows left for the next page because the budget ran out


def fit_to_budget(newest_first: Iterable[HistoryMessage], budget: int) -> Fitted:
    """Keep rows, newest first, while their JSON fits `budget`; the rest wait for the next page (and
    are not even rendered: `newest_first` may be a lazy iterator).

    A row too big to fit even on an empty page keeps its place with an omission marker instead, so
    paging always moves on.
    """
    kept: list[HistoryMessage] = []
    used = 0
    for message in newest_first:
        size = json_size(message) + 1  # the comma that joins it to its neighbour
        if size > budget:
            message = message.model_copy(update={"text": omitted_marker(size), "truncated": True})
            size = json_size(message) + 1
        if used + size > budget and kept:
            return Fitted(kept, deferred=True)
        kept.append(message)
        used += size
    return Fitted(kept, deferred=False)


def envelope_bound(session_key: str, session_id: str, window: HistoryWindow) -> int:
    """An upper bound of the page's size without messages: the widest values of the varying fields."""
    empty = HistoryPage(
        session_key=session_key,
        session_id=session_id,
        messages=[],
        window=window,
        truncated=False,
        has_more=False,
        next_offset=10**12,
        bytes=10**9,
    )
    return json_size(empty)


def with_exact_size(page: HistoryPage) -> tuple[HistoryPage, bytes]:
    """The page with `bytes` equal to the length of its own JSON, and that JSON (serialized once:
    `bytes` is the last field, so only its digits change)."""
    draft = page.model_copy(update={"bytes": 0}).model_dump_json().encode()
    head = draft.removesuffix(b"0}")
    size = len(draft)
    while len(head) + len(str(size)) + 1 != size:
        size = len(head) + len(str(size)) + 1
    return page.model_copy(update={"bytes": size}), head + str(size).encode() + b"}"


@dataclass(frozen=True)
class PageRequest:
    session_key: str
    session_id: str
    window: HistoryWindow
    limit: int
    offset: int
    max_bytes: int = RESPONSE_BYTES
    text_chars: int = TEXT_CHARS
    indexing: bool = False


def build_page(request: PageRequest, newest_first: list[StoredMessage]) -> tuple[HistoryPage, bytes]:
    """One backwards page: `newest_first` holds up to `limit + 1` rows from `offset` (one extra tells
    whether older rows remain); the answer lists the kept rows oldest first."""
    messages = (to_message(row, request.text_chars) for row in newest_first[: request.limit])
    budget = request.max_bytes - envelope_bound(request.session_key, request.session_id, request.window)
    fitted = fit_to_budget(messages, budget)
    has_more = fitted.deferred or len(newest_first) > request.limit
    page = HistoryPage(
        session_key=request.session_key,
        session_id=request.session_id,
        messages=list(reversed(fitted.kept)),
        window=request.window,
        truncated=fitted.deferred or any(m.truncated for m in fitted.kept),
        has_more=has_more,
        next_offset=request.offset + len(fitted.kept) if has_more else None,
        indexing=request.indexing,
        bytes=0,
    )
    return with_exact_size(page)


# ---------------------------------------------------------------------------------------------------
# Listing cursor


@dataclass(frozen=True)
class Cursor:
    """The last row of a listing page: the next page starts strictly after it (newest updated first)."""

    updated_at: datetime
    session_key: str


class BadCursor(ValueError):
    """The cursor was not one this service handed out."""


def encode_cursor(cursor: Cursor) -> str:
    raw = json.dumps([cursor.updated_at.isoformat(), cursor.session_key], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(token: str) -> Cursor:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        updated_at, session_key = json.loads(raw)
        when = datetime.fromisoformat(updated_at)
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError) as error:
        raise BadCursor("not a cursor from a previous page") from error
    # a forged cursor must not reach Postgres with what it cannot hold (issue 28)
    if not isinstance(session_key, str) or time_problem(when) or name_problem(session_key):
        raise BadCursor("not a cursor from a previous page")
    return Cursor(when, session_key)
