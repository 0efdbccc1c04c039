"""Pure record logic, free of I/O: how a fact candidate meets the agent's current records.

A candidate whose normalized text is already a current record changes nothing; one said again in other words
(cosine above 0.92, same entity) is a duplicate whose provenance is merged; a new value for the same entity and
relation of a supersedable kind replaces the old one, which keeps its history. Between 0.7 and 0.92 only a model
can tell a repetition from an update: with one, its verdict decides; without one, the candidate is kept as new
and marked pending. Events and plans are never merged, and records of another entity are never touched.
"""

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from cairn.consolidation.candidates import SUPERSEDABLE, Candidate, Kind

DUPLICATE_ABOVE = 0.92
GREY_FROM = 0.7
NEVER_MERGED: frozenset[Kind] = frozenset({"event", "plan"})

Verdict = Literal["same", "update", "different"]


@dataclass(frozen=True)
class Neighbour:
    """A current record of the agent, as the decision sees it; `similarity` is the cosine to the candidate
    (None when either has no vector)."""

    record_id: str
    kind: Kind
    entity: str
    relation: str
    content_hash: str
    valid_from: datetime
    similarity: float | None
    text: str = ""


@dataclass(frozen=True)
class Unchanged:
    """The same words are a current record already: nothing changes (provenance is merged)."""

    record_id: str


@dataclass(frozen=True)
class Duplicate:
    """Said again in other words: the record stays, the candidate's provenance is merged into it."""

    record_id: str
    similarity: float


@dataclass(frozen=True)
class Added:
    """A new current record, replacing `supersedes` (same entity and relation) when there are any;
    `pending` names what a model should still judge."""

    supersedes: tuple[str, ...] = ()
    pending: Literal["judgement"] | None = None


@dataclass(frozen=True)
class Judge:
    """A grey-zone neighbour in the same slot: one model call says same, update or different."""

    record_id: str
    similarity: float


Decision = Unchanged | Duplicate | Added | Judge


def normalized(text: str) -> str:
    """Case, width and punctuation folded, whitespace collapsed: "Remember: I'm vegan!" ~ "remember im vegan"."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(c if not unicodedata.category(c).startswith(("P", "S")) else " " for c in folded)
    return re.sub(r"\s+", " ", kept).strip()


def content_hash(candidate: Candidate) -> str:
    """Normalized text within the entity; an event or plan also by its day, since "went to the gym" on two days
    is two events."""
    parts = [candidate.entity.casefold(), normalized(candidate.text)]
    if candidate.kind in NEVER_MERGED:
        parts.append(f"{(candidate.valid_from or candidate.provenance.occurred_at).date():%Y-%m-%d}")
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def same_slot(candidate: Candidate, record: Neighbour) -> bool:
    return record.entity == candidate.entity and record.relation == candidate.relation and record.kind == candidate.kind


def decide(
    candidate: Candidate, digest: str, neighbours: Sequence[Neighbour], verdict: Verdict | None = None
) -> Decision:
    """What `candidate` does to the agent's current records. `verdict` is the model's answer to the `Judge`
    this function asked for on an earlier call with the same inputs (None: not asked, or no model)."""
    exact = next((n for n in neighbours if n.content_hash == digest), None)
    if exact is not None:
        return Unchanged(exact.record_id)
    if candidate.kind in NEVER_MERGED:
        return Added()
    same_entity = [n for n in neighbours if n.entity == candidate.entity and n.kind not in NEVER_MERGED]
    slot = [n for n in same_entity if same_slot(candidate, n)] if candidate.kind in SUPERSEDABLE else []
    replaced = tuple(n.record_id for n in slot)
    if candidate.correction and slot:
        # before the duplicate check: "I don't eat spicy food any more" is close to "I eat spicy food" in vectors
        return Added(supersedes=replaced)
    closest = _closest(same_entity)
    if closest is not None and closest.similarity is not None and closest.similarity > DUPLICATE_ABOVE:
        return Duplicate(closest.record_id, closest.similarity)
    if not slot:
        return Added()
    grey = _closest([n for n in slot if n.similarity is not None and n.similarity >= GREY_FROM])
    if grey is None or grey.similarity is None:
        return Added(supersedes=replaced)  # a different value for the same entity and relation: newest wins
    if verdict is None:
        return Judge(grey.record_id, grey.similarity)
    if verdict == "same":
        return Duplicate(grey.record_id, grey.similarity)
    return Added(supersedes=replaced if verdict == "update" else ())


def without_model(decision: Decision) -> Decision:
    """The grey zone with no model configured: kept as new, marked pending, nothing superseded on a guess."""
    return Added(pending="judgement") if isinstance(decision, Judge) else decision


def _closest(records: Sequence[Neighbour]) -> Neighbour | None:
    scored = [n for n in records if n.similarity is not None]
    return max(scored, key=lambda n: n.similarity or 0.0) if scored else None
