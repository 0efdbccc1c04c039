"""Pure memory-document logic, free of I/O: what a reset snapshot keeps, how it reads and where it goes,
and how a requested write becomes the next version of a document."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Literal

from cairn.events import DocumentChanged, Envelope, MemoryWriteRequested, ResetBoundary
from cairn.events.documents import (
    MAX_DOCUMENT_BYTES,
    SNAPSHOT_FOLDER,
    path_problem,
    text_character_problem,
    text_size_problem,
)
from cairn.events.models import TranscriptLine

SNAPSHOT_MESSAGES = 15
ROLE_LABELS = {"user": "User", "assistant": "Assistant"}

Change = Literal["created", "updated", "deleted"]


@dataclass(frozen=True)
class Document:
    """The current row of a document; a deleted document keeps its row and version as a tombstone."""

    version: int
    text: str
    deleted: bool = False


@dataclass(frozen=True)
class DocumentWrite:
    """The next version of one document, as stored and as announced."""

    path: str
    version: int
    text: str
    change: Change


# -- reset snapshots -------------------------------------------------------------------------------


def is_command(text: str) -> bool:
    return text.lstrip().startswith("/")


def snapshot_lines(tail: Iterable[TranscriptLine], keep: int = SNAPSHOT_MESSAGES) -> list[TranscriptLine]:
    """The last `keep` user/assistant messages of a closed window, in order; commands and tool or system
    output are left out, as are blank messages."""
    kept = [line for line in tail if line.role in ROLE_LABELS and line.text.strip() and not is_command(line.text)]
    return kept[-keep:] if keep > 0 else []


def one_line(text: str) -> str:
    """A message collapsed onto one line, so that each message stays one Markdown bullet."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def clock(at: datetime, day: date) -> str:
    """`HH:MM` (UTC) for a message on the snapshot's day, the full date and time for an older one."""
    at = at.astimezone(UTC)
    return f"{at:%H:%M}" if at.date() == day else f"{at:%Y-%m-%d %H:%M}"


def render_snapshot(event: ResetBoundary, lines: Iterable[TranscriptLine]) -> str:
    at = event.occurred_at.astimezone(UTC)
    header = [
        f"# Session snapshot {at:%Y-%m-%d %H:%M} UTC",
        "",
        f"- **Session key**: {event.session_key}",
        f"- **Session id**: {event.session_id}",
        f"- **Reason**: {event.reason}",
        f"- **Time**: {at:%Y-%m-%d %H:%M} UTC",
        "",
        "## Conversation",
        "",
    ]
    bullets = [
        f"- **{ROLE_LABELS[line.role]}** ({clock(line.occurred_at, at.date())}): {one_line(line.text)}"
        for line in lines
    ]
    return "\n".join([*header, *bullets]) + "\n"


def snapshot_path(at: datetime, attempt: int = 1) -> str:
    """`memory/snapshots/YYYY-MM-DD-HHMM.md` in UTC; later resets in the same minute get `-2`, `-3`, …"""
    stem = f"{SNAPSHOT_FOLDER}/{at.astimezone(UTC):%Y-%m-%d-%H%M}"
    return f"{stem}.md" if attempt <= 1 else f"{stem}-{attempt}.md"


# -- document writes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Skipped:
    """A requested write that is not applied: why, and the version a client can see meanwhile."""

    outcome: Literal["unchanged", "conflict", "missing", "too_large"]
    current: int
    reason: str


@dataclass(frozen=True)
class WriteOutcome:
    """What became of a write request, kept under its event id for ingest to answer the client with:
    `version` is the version written, or the client-visible version when nothing was."""

    request_id: str
    path: str
    outcome: Literal["applied", "unchanged", "conflict", "missing", "too_large"]
    version: int
    change: Change | None
    detail: str


def refusal(request: MemoryWriteRequested) -> str | None:
    """Why a request breaks the rules ingest enforces (so it should never have been published)."""
    problem = path_problem(request.path) or text_character_problem(request.text)
    if problem is None and request.mode == "put":
        problem = text_size_problem(request.text)
    return problem


def visible_version(current: Document | None) -> int:
    """The version a client can see: 0 for a missing or deleted document (so `if_match=0` is create-only)."""
    return 0 if current is None or current.deleted else current.version


def next_version(current: Document | None, path: str, text: str, *, delete: bool = False) -> DocumentWrite:
    version = 1 if current is None else current.version + 1
    if delete:
        return DocumentWrite(path, version, "", "deleted")
    created = current is None or current.deleted
    return DocumentWrite(path, version, text, "created" if created else "updated")


def appended(current: str, addition: str) -> str:
    """Append on a new line, unless either side is empty or the document already ends with one."""
    if not current or not addition or current.endswith("\n"):
        return current + addition
    return f"{current}\n{addition}"


def plan_write(current: Document | None, request: MemoryWriteRequested) -> DocumentWrite | Skipped:
    """The write a (valid) request asks for, or why nothing is written: an `if_match` conflict, a missing
    document to delete, an append past the size limit, or no change at all."""
    seen = visible_version(current)
    if request.if_match is not None and request.if_match != seen:
        return Skipped("conflict", seen, f"if_match {request.if_match} does not match current version {seen}")
    live = None if current is None or current.deleted else current.text
    if request.mode == "delete":
        if live is None:
            return Skipped("missing", seen, "document does not exist")
        return next_version(current, request.path, "", delete=True)
    text = request.text if request.mode == "put" else appended(live or "", request.text)
    if text == live:
        return Skipped("unchanged", seen, "text unchanged")
    size = len(text.encode())
    if size > MAX_DOCUMENT_BYTES:
        reason = f"the document would be {size} bytes in UTF-8; the limit is {MAX_DOCUMENT_BYTES} bytes"
        return Skipped("too_large", seen, reason)
    return next_version(current, request.path, text)


def outcome_of(request: MemoryWriteRequested, plan: DocumentWrite | Skipped) -> WriteOutcome:
    if isinstance(plan, Skipped):
        return WriteOutcome(request.event_id, request.path, plan.outcome, plan.current, None, plan.reason)
    return WriteOutcome(request.event_id, request.path, "applied", plan.version, plan.change, "")


def document_changed(source: Envelope, write: DocumentWrite, ingest_seq: int | None = None) -> DocumentChanged:
    return DocumentChanged(
        tenant_id=source.tenant_id,
        agent_id=source.agent_id,
        causation_id=source.event_id,
        correlation_id=source.correlation_id or source.event_id,
        path=write.path,
        version=write.version,
        change=write.change,
        text=write.text,
        ingest_seq=ingest_seq,
    )
