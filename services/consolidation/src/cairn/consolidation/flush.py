"""The pre-compaction flush, free of I/O: which sessions flush, what the silent model turn is told and may do,
what its answer writes, and how long a failed flush waits before its next try.

The turn gets one tool, `append_daily_note`, whose only target is the day's note; `MEMORY.md` and the bank are
read-only in it. A call to any other tool, or naming any other path, is refused and counted, never written.
"""

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from cairn.consolidation.domain import ROLE_LABELS, is_command, one_line
from cairn.delivery.faults import Backoff
from cairn.events.documents import daily_path
from cairn.events.routing import is_incognito
from cairn.llm import ToolCall

TOOL = "append_daily_note"
PURPOSE = "memory-flush"  # the model usage line the flush's calls are counted under
# The newest messages of the window the turn reads, at most: about 12,000 tokens of alphabetic text.
WINDOW_CHARS = 48_000
MESSAGE_CHARS = 4_000  # each message cut at this, as history shows it
MAX_NOTE_CHARS = 8_000  # of what one flush appends
NO_MODEL = "no model configured for this tenant: the flush waits until one is"
# A failed flush is tried again after 5 s, 10 s, 20 s … up to an hour: a model down for a day costs 24 calls.
RETRY = Backoff(first_s=5.0, cap_s=3600.0)
_UNWRITABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
NAMESPACE = uuid.UUID("5d1f3c2a-8e4b-4f6a-9c7d-2b1e0a9f8c7d")  # of the flush's write request ids


def flushes(session_key: str) -> bool:
    """Cron and incognito sessions never flush (heartbeats never make a session cross the threshold: the session
    service counts no background message as activity)."""
    return not (session_key.startswith("cron:") or is_incognito(session_key))


@dataclass(frozen=True)
class Line:
    """One transcript message of the flushed window."""

    role: str
    text: str
    occurred_at: datetime


def window_text(lines: Iterable[Line], limit: int = WINDOW_CHARS) -> str:
    """The window's user and assistant messages as `[time] Role: text`, newest kept when it is too long."""
    rendered = [
        f"[{line.occurred_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC] {ROLE_LABELS[line.role]}: "
        f"{one_line(line.text)[:MESSAGE_CHARS]}"
        for line in lines
        if line.role in ROLE_LABELS and line.text.strip() and not is_command(line.text)
    ]
    kept: list[str] = []
    size = 0
    for text in reversed(rendered):
        size += len(text) + 1
        if size > limit:
            break
        kept.append(text)
    return "\n".join(reversed(kept))


def day_of(at: datetime, timezone: str | None) -> date:
    """The day in the agent's time zone (its config's `reset.timezone`, UTC unless set), as daily notes are named."""
    try:
        zone = ZoneInfo(timezone) if timezone else UTC
    except (ValueError, KeyError):  # validated with the config; an unknown name falls back rather than stalls
        zone = UTC
    return at.astimezone(zone).date()


def tool_spec(path: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": TOOL,
                "description": f"Append durable notes (Markdown bullet points) to today's daily note {path}. "
                "The only write allowed in this turn.",
                "parameters": {
                    "type": "object",
                    "properties": {"text": {"type": "string", "description": "the notes to append"}},
                    "required": ["text"],
                },
            },
        }
    ]


def prompt(window: str, path: str) -> list[dict[str, Any]]:
    system = (
        "You are the memory writer of a chat agent. The conversation below is about to be compacted: whatever is "
        "not written down now leaves the agent's context. Write what is worth keeping as short, durable notes — "
        "facts about the people, their preferences, decisions, plans with dates, open tasks, lessons — as Markdown "
        f"bullet points, in the conversation's language, with one call of `{TOOL}`. Its only target is today's "
        f"daily note {path}; MEMORY.md and the files under memory/bank/ are read-only in this turn, and any other "
        "write is refused. If nothing is worth keeping, answer NO_REPLY and call nothing. This turn is silent: "
        "nobody reads your answer."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": f"Conversation:\n{window}"}]


@dataclass(frozen=True)
class FlushPlan:
    """What the turn's answer writes (`text`, empty for nothing) and the calls refused, each with why."""

    text: str
    refused: tuple[str, ...]


def plan_flush(calls: Sequence[ToolCall], path: str, heading: str) -> FlushPlan:
    """The notes of every valid `append_daily_note` call, under one heading; anything else is refused."""
    notes: list[str] = []
    refused: list[str] = []
    for call in calls:
        problem = call_refusal(call, path)
        if problem is not None:
            refused.append(problem)
        else:
            notes.append(str(call.arguments["text"]).strip())
    body = writable("\n".join(notes))[:MAX_NOTE_CHARS].strip()
    return FlushPlan(f"{heading}\n\n{body}\n" if body else "", tuple(refused))


def writable(text: str) -> str:
    """The notes without the characters a document cannot hold (NUL and the other controls but tab, line feed
    and carriage return; lone surrogates): a model emitting one must not make its flush fail on every try."""
    return "".join(c for c in text if c in "\t\n\r" or not _UNWRITABLE.match(c))


def call_refusal(call: ToolCall, path: str) -> str | None:
    if call.name != TOOL:
        target = call.arguments.get("path")
        named = f" to {target}" if isinstance(target, str) else ""
        return f"{call.name}{named}: refused, the flush may only append to {path}"
    target = call.arguments.get("path", path)
    if target != path:
        return f"{TOOL} to {target}: refused, MEMORY.md and the bank are read-only and the only target is {path}"
    text = call.arguments.get("text")
    if not isinstance(text, str) or not text.strip():
        return f"{TOOL} without text: nothing to write"
    return None


def heading(at: datetime, session_key: str, cycle: int) -> str:
    """Each flush's notes start with where and when they come from."""
    return f"## Notes before compaction ({at.astimezone(UTC):%H:%M} UTC, {session_key}, cycle {cycle})"


def write_id(tenant: str, session_id: str, reset_index: int, cycle: int) -> str:
    """The one id of a cycle's note write: a flush that runs again (killed after writing, before recording it
    done) asks for the same write, which is applied once."""
    return str(uuid.uuid5(NAMESPACE, f"{tenant}/{session_id}/{reset_index}/{cycle}"))


def daily_note_path(at: datetime, timezone: str | None) -> str:
    return daily_path(day_of(at, timezone))
