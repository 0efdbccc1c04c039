"""What extraction asks the model and how its answer is read: the prompt, the `record_memories` tool, and a
defensive reading of the reply (a tool call, or JSON in the text) into candidates. Pure: a reply nothing can
be read from is `Unreadable`, never an exception; an item that is not a memory is left out."""

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cairn.consolidation.candidates import KINDS, Candidate, Kind, Origin, Provenance
from cairn.consolidation.extraction_turns import Turn
from cairn.llm import ChatResult
from cairn.text import first_date

TOOL_NAME = "record_memories"
MAX_TEXT_CHARS = 500
MAX_NAME_CHARS = 120
MAX_ITEMS = 50  # a batch of turns holds a few facts; more is a model gone astray

SYSTEM_PROMPT = (
    "You read a conversation between a user and an assistant and pick out what is worth remembering about the "
    "user and their world for later conversations: profile facts (name, home, job, family), preferences (likes, "
    "dislikes, diet), events that happened, plans (appointments, trips, deadlines), lessons (what worked or "
    "failed), and project facts. Leave out small talk, questions, and what the assistant merely suggested. "
    f"Call {TOOL_NAME} once with every memory; with none worth keeping, call it with an empty list. For each: "
    "kind; text, the fact as one sentence in the conversation's language; entity, who or what it is about in "
    "lower case ('user', 'user's sister', 'project cairn'); relation, what about it ('diet', 'home city', "
    "'flight'); importance from 0 to 1; original, the exact words said; turns, the numbers of the turns it "
    "comes from; correction, true when the speaker corrects something said before. Keep relative dates such as "
    "'next Tuesday' in original exactly as said."
)

TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Record the memories found in the conversation (an empty list when there are none).",
        "parameters": {
            "type": "object",
            "properties": {
                "memories": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "kind": {"type": "string", "enum": list(KINDS)},
                            "text": {"type": "string"},
                            "entity": {"type": "string"},
                            "relation": {"type": "string"},
                            "importance": {"type": "number", "minimum": 0, "maximum": 1},
                            "original": {"type": "string"},
                            "turns": {"type": "array", "items": {"type": "integer"}},
                            "correction": {"type": "boolean"},
                        },
                        "required": ["kind", "text", "entity", "relation", "importance", "original"],
                    },
                }
            },
            "required": ["memories"],
        },
    },
}

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Unreadable:
    reason: str


@dataclass(frozen=True)
class Read:
    candidates: list[Candidate]
    dropped: int  # items that were no memory (unknown kind, no text, importance not a number)


def messages_for(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    lines = [
        f"[{number}] {turn.occurred_at.isoformat(timespec='minutes')} {_speaker(turn)}: {turn.text}"
        for number, turn in enumerate(turns, start=1)
    ]
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n".join(lines)}]


def _speaker(turn: Turn) -> str:
    if turn.role == "assistant":
        return "assistant"
    return "user" if turn.origin == "owner" else f"group member {turn.sender_name or 'unknown'}"


def items_of(reply: ChatResult) -> list[Any] | Unreadable:
    """The memory items of a reply: the tool call's `memories`, else JSON in the text (an object with
    `memories`, or a list), fenced or not."""
    for call in reply.tool_calls:
        if call.name == TOOL_NAME:
            memories = call.arguments.get("memories")
            return memories if isinstance(memories, list) else Unreadable("the tool call has no list of memories")
    text = (reply.content or "").strip()
    if not text:
        return Unreadable("the reply has neither the tool call nor text")
    fenced = _FENCE.search(text)
    try:
        parsed = json.loads(fenced.group(1) if fenced else text)
    except json.JSONDecodeError:
        return Unreadable("the reply's text is not JSON")
    if isinstance(parsed, dict):
        parsed = parsed.get("memories")
    return parsed if isinstance(parsed, list) else Unreadable("the reply's JSON has no list of memories")


def read_reply(reply: ChatResult, turns: Sequence[Turn], min_importance: float) -> Read | Unreadable:
    items = items_of(reply)
    if isinstance(items, Unreadable):
        return items
    candidates: list[Candidate] = []
    dropped = 0
    for item in items[:MAX_ITEMS]:
        candidate = candidate_of(item, turns)
        if candidate is None:
            dropped += 1
        elif candidate.importance >= min_importance:
            candidates.append(candidate)
    return Read(candidates, dropped + max(0, len(items) - MAX_ITEMS))


def candidate_of(item: Any, turns: Sequence[Turn]) -> Candidate | None:
    if not isinstance(item, dict):
        return None
    kind, text, importance = item.get("kind"), _text(item.get("text"), MAX_TEXT_CHARS), item.get("importance")
    if kind not in KINDS or not text or isinstance(importance, bool) or not isinstance(importance, int | float):
        return None
    cited = _cited(item.get("turns"), turns)
    original = _text(item.get("original"), MAX_TEXT_CHARS) or text
    anchor = cited[0].occurred_at
    valid_from, valid_until = validity(_kind(kind), original, text, anchor)
    return Candidate(
        kind=_kind(kind),
        text=text,
        entity=(_text(item.get("entity"), MAX_NAME_CHARS) or "user").lower(),
        relation=(_text(item.get("relation"), MAX_NAME_CHARS) or kind).lower(),
        importance=min(1.0, max(0.0, float(importance))),
        original=original,
        provenance=Provenance(
            session_key=cited[0].session_key,
            session_id=cited[0].session_id,
            message_ids=tuple(t.message_id for t in cited),
            origin=origin_of(cited),
            occurred_at=anchor,
        ),
        valid_from=valid_from,
        valid_until=valid_until,
        correction=item.get("correction") is True,
    )


def validity(kind: Kind, original: str, text: str, said_at: datetime) -> tuple[datetime, datetime | None]:
    """World time a fact holds: the date its words name, resolved against when they were said ("下周二" on a
    Sunday is two days on); an event or plan holds for that day or span, another fact from it on. Without a
    date, from when it was said."""
    named = first_date(original, said_at) or first_date(text, said_at)
    if named is None:
        return said_at, None
    start, end = named.window(said_at)
    return (start, end) if kind in ("event", "plan") else (start, None)


def origin_of(cited: Sequence[Turn]) -> Origin:
    """The least trusted speaker of the turns a memory comes from: one group member's word makes it untrusted."""
    origins = {t.origin for t in cited}
    if "untrusted" in origins:
        return "untrusted"
    return "owner" if "owner" in origins else "agent"


def _cited(raw: Any, turns: Sequence[Turn]) -> list[Turn]:
    """The turns an item names by number; all of the batch when it names none that exist."""
    numbers = raw if isinstance(raw, list) else []
    cited = [
        turns[n - 1]
        for n in dict.fromkeys(numbers)
        if isinstance(n, int) and not isinstance(n, bool) and 0 < n <= len(turns)
    ]
    return cited or list(turns)


def _text(raw: Any, limit: int) -> str:
    return " ".join(raw.split())[:limit] if isinstance(raw, str) else ""


def _kind(raw: str) -> Kind:
    return next(k for k in KINDS if k == raw)
