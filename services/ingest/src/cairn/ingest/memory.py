"""Pure rules of memory writes at the door: what is refused before anything is published (and with which
status, field and limit), how `If-Match` and idempotency keys read, which day a daily note is for, and
what the client is told once consolidation has decided."""

from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal
from zoneinfo import ZoneInfo

from cairn.events.documents import path_problem, text_character_problem, text_size_problem
from cairn.events.envelope import MAX_VERSION

IDEMPOTENCY_KEY_CHARS = 200


@dataclass(frozen=True)
class Refusal:
    status: int
    field: str
    message: str


def write_refusal(path: str, text: str) -> Refusal | None:
    """422 for a path outside the layout or text with control characters, 413 for a text over the size
    limit (an appended piece is measured again with its document, by consolidation)."""
    problem = path_problem(path)
    if problem is not None:
        return Refusal(422, "path", problem)
    problem = text_character_problem(text)
    if problem is not None:
        return Refusal(422, "text", problem)
    problem = text_size_problem(text)
    if problem is not None:
        return Refusal(413, "text", problem)
    return None


def version_of(if_match: str | None) -> int | None:
    """The version in an `If-Match` header (`3`, `"3"` or `W/"3"`); ValueError for anything else."""
    if if_match is None:
        return None
    value = if_match.strip().removeprefix("W/").strip('"')
    if not value.isascii() or not value.isdigit() or int(value) > MAX_VERSION:
        raise ValueError('If-Match must be a version this API gave as ETag, such as "3"')
    return int(value)


def idempotency_problem(key: str) -> str | None:
    if not key or len(key) > IDEMPOTENCY_KEY_CHARS or not key.isprintable():
        return f"Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_CHARS} printable characters"
    return None


def memory_dedup_id(tenant_id: str, key: str) -> str:
    """A retried write with the same Idempotency-Key is the same write (JetStream's `Nats-Msg-Id`)."""
    return f"{tenant_id}:memory:{key}"


def today_in(timezone: str, now: datetime) -> date:
    """The day it is at `now` in the agent's time zone (an IANA name, validated with the agent config)."""
    return now.astimezone(ZoneInfo(timezone)).date()


Outcome = Literal["applied", "unchanged", "conflict", "missing", "too_large"]
Change = Literal["created", "updated", "deleted"]


@dataclass(frozen=True)
class Decided:
    """What consolidation recorded for a write request (see `consolidation.write_outcomes`)."""

    outcome: Outcome
    version: int
    change: Change | None
    detail: str


@dataclass(frozen=True)
class Answer:
    """The HTTP answer to a decided write: a status, and either the written version or a problem."""

    status: int
    change: Change | Literal["unchanged"] | None = None
    problem: str | None = None
    field: str | None = None


def answer(path: str, if_match: int | None, decided: Decided) -> Answer:
    if decided.outcome == "applied":
        return Answer(201 if decided.change == "created" else 200, decided.change)
    if decided.outcome == "unchanged":
        return Answer(200, "unchanged")
    if decided.outcome == "conflict":
        message = f"If-Match is {if_match} but {path} is at version {decided.version}"
        if decided.version == 0:
            message = f"If-Match is {if_match} but {path} does not exist (version 0)"
        return Answer(409, problem=f"{message}: read it again and apply your change to that version.",
                      field="If-Match")  # fmt: skip
    if decided.outcome == "missing":
        return Answer(404, problem=f"There is no memory file {path!r}.")
    return Answer(413, problem=f"The document is too large: {decided.detail}.", field="text")
