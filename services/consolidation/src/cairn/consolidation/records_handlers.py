"""The record path's handlers, one per consumed event: an explicit request (`memory.record-requested`), a user's
"remember …" in a transcript entry, and a memory write that may be a person's edit of a bank file."""

import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from pydantic import ValidationError

from cairn.consolidation.bank import is_bank_path
from cairn.consolidation.candidates import Candidate, Provenance
from cairn.consolidation.explicit import explicit_candidate, kind_of, relation_of
from cairn.consolidation.handlers import on_memory_write_requested
from cairn.consolidation.records_store import PostgresRecordStore
from cairn.consolidation.records_writer import Writer, apply_edit, keep
from cairn.consolidation.store import PostgresStore
from cairn.delivery.consumer import Delivery, Handler
from cairn.delivery.publisher import EventPublisher
from cairn.events import (
    DocumentChanged,
    Envelope,
    Event,
    MemoryWriteRequested,
    RecordRequested,
    TranscriptAppended,
)
from cairn.llm import Models
from cairn.memindex import Embedder

log = logging.getLogger(__name__)
# The namespace of extracted requests' ids (uuid5 of what a candidate says and where).
_EXTRACTED = uuid.UUID("5f1d8c0e-3b7a-4c7e-9a55-2f6c1b0d9e41")

E = TypeVar("E", bound=Envelope)
WriterHandler = Callable[[Writer, E, int], Awaitable[Sequence[Event]]]


def requested_candidate(event: RecordRequested) -> Candidate:
    """A request as a candidate (an explicit one, or one model extraction asked for); what it leaves out is decided
    as the rules decide it."""
    provenance = Provenance(
        event.session_key or "", event.session_id or "", event.message_ids, event.origin, event.occurred_at
    )
    return Candidate(
        kind=event.kind or kind_of(event.text), text=event.text, entity=(event.entity or "user").casefold(),
        relation=(event.relation or relation_of(event.text)).casefold(), importance=event.importance,
        original=event.original or event.text, provenance=provenance, valid_from=event.valid_from,
        valid_until=event.valid_until, explicit=event.explicit, correction=event.correction,
    )  # fmt: skip


def candidate_request(tenant: str, agent: str, candidate: Candidate) -> RecordRequested | None:
    """A candidate (extracted by model, or by the explicit rules) as the request the record store applies (exactly
    once, in the ingest stream's order, like any other). Its ids are derived from what it says and where it was said,
    so reading the same turns again (a batch retried after its lease, a redelivered entry) asks for the same record,
    and the request is deduplicated. None when the words do not fit a request (too long, characters no field takes):
    that candidate is dropped."""
    where = candidate.provenance
    key = "|".join((tenant, agent, where.session_id, ",".join(where.message_ids), candidate.kind, candidate.entity,
                    candidate.relation, candidate.text))  # fmt: skip
    event_id = uuid.uuid5(_EXTRACTED, key)
    try:
        return RecordRequested(
            event_id=str(event_id), tenant_id=tenant, agent_id=agent, occurred_at=where.occurred_at,
            record_id=str(uuid.uuid5(event_id, "record")), text=candidate.text, kind=candidate.kind,
            entity=candidate.entity[:200] or None, relation=candidate.relation[:200] or None,
            importance=candidate.importance, session_key=where.session_key or None, session_id=where.session_id or None,
            message_ids=where.message_ids, origin=where.origin, original=candidate.original or None,
            valid_from=candidate.valid_from, valid_until=candidate.valid_until, correction=candidate.correction,
            explicit=candidate.explicit,
        )  # fmt: skip
    except ValidationError as refused:
        log.warning("an extracted candidate was dropped, it fits no record request: %s", refused.errors()[:1])
        return None


def publish_as_requests(publisher: EventPublisher) -> "Callable[[str, str, list[Candidate]], Awaitable[None]]":
    """Where model extraction hands its candidates: as record requests into the ingest stream, all acknowledged
    before the batch counts as extracted (a publish that fails leaves the batch to be extracted again)."""

    async def on_candidates(tenant: str, agent: str, candidates: list[Candidate]) -> None:
        requests = [r for c in candidates if (r := candidate_request(tenant, agent, c)) is not None]
        if requests:
            await publisher.publish_many(requests)

    return on_candidates


async def on_record_requested(w: Writer, event: RecordRequested, position: int) -> Sequence[Event]:
    kept = await keep(w, event, requested_candidate(event), event.record_id, position)
    await w.records.request_decided(
        event.tenant_id, event.event_id, event.agent_id, position, kept.record_id, kept.outcome
    )
    return kept.changes


def explicit_requests(entries: Sequence[TranscriptAppended]) -> list[RecordRequested]:
    """The record requests of users' explicit "remember …" in direct chats among these transcript entries (rules, no
    model): read where every entry is read anyway (extraction's consumer), applied like any other request."""
    found = [(e, c) for e in entries if (c := explicit_candidate(e)) is not None]
    return [r for e, c in found if (r := candidate_request(str(e.tenant_id), e.agent_id, c)) is not None]


async def on_memory_write(w: Writer, event: MemoryWriteRequested, position: int) -> Sequence[Event]:
    """The document write as before; when it changed a bank file, the records whose lines it touched follow."""
    before = await w.documents.get_document(event.tenant_id, event.agent_id, event.path)
    changes = await on_memory_write_requested(w.documents, event, position)
    for change in changes:
        if isinstance(change, DocumentChanged) and is_bank_path(change.path):
            old = "" if before is None or before.deleted else before.text
            await apply_edit(w, event, change.path, old, change.text)
    return changes


def bind_writer(handler: WriterHandler[E], embedder: Embedder, models: Models | None) -> Handler:
    """Adapt a writer handler to the projection's `(conn, event, delivery)` signature."""

    async def handle(conn: Any, event: E, delivery: Delivery) -> Sequence[Event]:
        writer = Writer(PostgresStore(conn), PostgresRecordStore(conn), embedder, models)
        return await handler(writer, event, delivery.stream_seq)

    return handle
