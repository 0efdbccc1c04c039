"""The record path's handlers, one per consumed event: an explicit request (`memory.record-requested`), a user's
"remember …" in a transcript entry, and a memory write that may be a person's edit of a bank file."""

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from cairn.consolidation.bank import is_bank_path
from cairn.consolidation.candidates import Candidate, Provenance
from cairn.consolidation.explicit import explicit_candidate, kind_of, relation_of
from cairn.consolidation.handlers import on_memory_write_requested
from cairn.consolidation.records_store import PostgresRecordStore
from cairn.consolidation.records_writer import Writer, apply_edit, keep
from cairn.consolidation.store import PostgresStore
from cairn.delivery.consumer import Delivery, Handler
from cairn.events import (
    DocumentChanged,
    Envelope,
    Event,
    MemoryWriteRequested,
    RecordRequested,
    TranscriptAppended,
    new_event_id,
)
from cairn.llm import Models
from cairn.memindex import Embedder

E = TypeVar("E", bound=Envelope)
WriterHandler = Callable[[Writer, E, int], Awaitable[Sequence[Event]]]


def requested_candidate(event: RecordRequested) -> Candidate:
    """An explicit request as a candidate; what the client left out is decided as the rules decide it."""
    provenance = Provenance(event.session_key or "", "", event.message_ids, event.origin, event.occurred_at)
    return Candidate(
        kind=event.kind or kind_of(event.text), text=event.text, entity=(event.entity or "user").casefold(),
        relation=(event.relation or relation_of(event.text)).casefold(), importance=event.importance,
        original=event.text, provenance=provenance, explicit=True,
    )  # fmt: skip


async def on_record_requested(w: Writer, event: RecordRequested, position: int) -> Sequence[Event]:
    kept = await keep(w, event, requested_candidate(event), event.record_id, position)
    await w.records.request_decided(
        event.tenant_id, event.event_id, event.agent_id, position, kept.record_id, kept.outcome
    )
    return kept.changes


async def on_transcript_appended(w: Writer, event: TranscriptAppended, position: int) -> Sequence[Event]:
    """Only a user's explicit "remember …" in a direct chat becomes a record here (rules, no model)."""
    candidate = explicit_candidate(event)
    if candidate is None:
        return ()
    return (await keep(w, event, candidate, new_event_id(), None)).changes


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
