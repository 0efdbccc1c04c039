"""What extraction hands to the record store: a fact candidate, before dedup and supersede decide whether it
becomes a new record, merges into one, replaces one or changes nothing. Rules (explicit "remember …" statements)
and the model both produce these; neither writes records directly."""

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

Kind = Literal["profile", "preference", "event", "plan", "lesson", "project"]
KINDS: tuple[Kind, ...] = ("profile", "preference", "event", "plan", "lesson", "project")
# Kinds whose newest value wins within one entity and relation (the old one keeps its history); events and plans
# are never merged.
SUPERSEDABLE: frozenset[Kind] = frozenset({"profile", "preference", "project", "lesson"})

# Who said it: the agent's owner (the user of a direct conversation, or a listed owner peer), the agent itself,
# someone whose words are not to be promoted (a group member, a forwarded text), or the system.
Origin = Literal["owner", "agent", "untrusted", "system"]


@dataclass(frozen=True)
class Provenance:
    """Where a candidate's words were said: the session, the messages and when (world time)."""

    session_key: str
    session_id: str
    message_ids: tuple[str, ...]
    origin: Origin
    occurred_at: datetime


@dataclass(frozen=True)
class Candidate:
    kind: Kind
    text: str  # the fact as one sentence in the conversation's language, as it will be rendered
    entity: str  # who or what it is about, normalised lower case ("user", "user's sister", "project cairn")
    relation: str  # what about it ("diet", "home city", "flight"): supersede happens within entity + relation
    importance: float  # 0..1; explicit statements are 1.0 and bypass the importance gate
    original: str  # the words as said
    provenance: Provenance
    valid_from: datetime | None = None  # world time the fact holds from (a resolved "next Tuesday"), else said-at
    valid_until: datetime | None = None
    explicit: bool = False  # an explicit "remember …" statement, extracted by rule
    correction: bool = False  # the speaker corrects an earlier value ("actually I don't eat spicy food any more")
