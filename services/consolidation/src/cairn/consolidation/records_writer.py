"""The memory writer's record path: a candidate is embedded, decided against the agent's current records
(`records.decide`, the model asked only in the grey zone), stored, and its bank file rendered as the next
document version; a person's edit of a bank file updates or retires the records whose lines it changed."""

import logging
from dataclasses import dataclass

from cairn.consolidation.bank import (
    BankLine,
    bank_path,
    fact_of,
    is_bank_path,
    line_edits,
    placements_in,
    record_line,
    render,
)
from cairn.consolidation.candidates import Candidate, Kind, Provenance
from cairn.consolidation.domain import Document, document_changed, next_version
from cairn.consolidation.explicit import language_of
from cairn.consolidation.records import Added, Duplicate, Judge, Unchanged, content_hash, decide, without_model
from cairn.consolidation.records_judge import judge
from cairn.consolidation.records_store import NewRecord, RecordStore
from cairn.consolidation.store import MemoryStore
from cairn.events import DocumentChanged, Envelope, new_event_id
from cairn.llm import Models
from cairn.memindex import Embedder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Writer:
    """What one event's transaction writes with: both stores on its connection, the embedder, the models."""

    documents: MemoryStore
    records: RecordStore
    embedder: Embedder
    models: Models | None


@dataclass(frozen=True)
class Kept:
    record_id: str
    outcome: str  # added, superseded, duplicate, unchanged, pending
    changes: tuple[DocumentChanged, ...] = ()


async def _vector(embedder: Embedder, text: str) -> list[float] | None:
    if embedder.model is None:
        return None
    vectors = await embedder.embed([text])
    return [float(x) for x in vectors[0]]


async def keep(w: Writer, source: Envelope, candidate: Candidate, record_id: str, ingest_seq: int | None) -> Kept:
    """Store `candidate` as `record_id`, merge it into the record it repeats, or change nothing."""
    tenant, agent = source.tenant_id, source.agent_id
    # The bank file first, then the records: the order a person's edit of the bank file takes its locks in.
    current = await w.documents.get_document(tenant, agent, bank_path(candidate.kind))
    vector = await _vector(w.embedder, candidate.text)
    neighbours = await w.records.neighbours(tenant, agent, candidate.entity, vector, w.embedder.model)
    digest = content_hash(candidate)
    decision = decide(candidate, digest, neighbours)
    if isinstance(decision, Judge):
        stored = next(n.text for n in neighbours if n.record_id == decision.record_id)
        verdict = await judge(w.models, tenant, stored, candidate.text)
        decision = without_model(decision) if verdict is None else decide(candidate, digest, neighbours, verdict)
    if isinstance(decision, Unchanged | Duplicate):
        await w.records.merge_provenance(tenant, decision.record_id, candidate.provenance.message_ids, record_id)
        return Kept(decision.record_id, "unchanged" if isinstance(decision, Unchanged) else "duplicate")
    assert isinstance(decision, Added)
    record = NewRecord(
        record_id, agent, candidate, language_of(candidate.text), digest, bank_path(candidate.kind), vector,
        w.embedder.model, decision.pending,
    )  # fmt: skip
    await w.records.insert(tenant, record)
    if decision.supersedes:
        at = candidate.valid_from or candidate.provenance.occurred_at
        await w.records.supersede(tenant, decision.supersedes, record_id, at)
    change = await render_bank(w, source, candidate.kind, current, ingest_seq)
    outcome = "pending" if decision.pending else "superseded" if decision.supersedes else "added"
    return Kept(record_id, outcome, () if change is None else (change,))


async def render_bank(
    w: Writer, source: Envelope, kind: Kind, current: Document | None, ingest_seq: int | None
) -> DocumentChanged | None:
    """Render the kind's bank file against `current`, the version this transaction read (and locked until it
    commits), as its next version; a concurrent first version makes the save fail and the event retry."""
    tenant, agent, path = source.tenant_id, source.agent_id, bank_path(kind)
    rows = await w.records.bank(tenant, agent, path)
    lines = [
        BankLine(r.record_id, record_line(r.text, r.language, r.recorded_at.date()), r.rendered, r.current)
        for r in rows
    ]
    live = None if current is None or current.deleted else current.text
    rendered = render(live, kind, lines)
    await w.records.place(tenant, agent, path, rendered.placements)
    if rendered.text == live:
        return None
    write = next_version(current, path, rendered.text)
    await w.documents.save_document(tenant, agent, write)
    return document_changed(source, write, ingest_seq)


async def apply_edit(w: Writer, source: Envelope, path: str, before: str, after: str) -> None:
    """A person's edit of a bank file: a record whose line was replaced is superseded by the person's words (as
    they wrote them, so no later render touches the line); one whose line was removed is retired."""
    if not is_bank_path(path):
        return
    tenant, agent = source.tenant_id, source.agent_id
    rows = await w.records.bank(tenant, agent, path)
    owned = [BankLine(r.record_id, "", r.rendered, r.current) for r in rows]
    for edit in line_edits(before, after, owned):
        if edit.line is None:
            await w.records.retire(tenant, edit.record_id, source.occurred_at, "edited")
            log.info("record %s retired: its line was removed from %s", edit.record_id, path)
            continue
        await _update_by_edit(w, source, path, edit.record_id, edit.line, edit.line_number)
    rows = await w.records.bank(tenant, agent, path)
    await w.records.place(
        tenant, agent, path, placements_in(after, [(r.record_id, r.rendered) for r in rows if r.current])
    )


async def _update_by_edit(
    w: Writer, source: Envelope, path: str, record_id: str, line: str, line_number: int | None
) -> None:
    old = await w.records.record(source.tenant_id, record_id)
    if old is None:
        return
    fact = fact_of(line)
    provenance = Provenance("", "", (), "owner", source.occurred_at)
    candidate = Candidate(
        kind=old["kind"], text=fact, entity=old["entity"], relation=old["relation"], importance=old["importance"],
        original=line, provenance=provenance, explicit=True, correction=True,
    )  # fmt: skip
    new_id = new_event_id()
    record = NewRecord(
        new_id, source.agent_id, candidate, language_of(fact), content_hash(candidate), path,
        await _vector(w.embedder, fact), w.embedder.model, rendered=line, bank_line=line_number,
    )  # fmt: skip
    await w.records.insert(source.tenant_id, record)
    await w.records.supersede(source.tenant_id, (record_id,), new_id, source.occurred_at)
    log.info("record %s superseded by %s: its line in %s was edited", record_id, new_id, path)
