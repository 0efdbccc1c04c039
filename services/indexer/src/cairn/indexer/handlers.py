"""One handler per event the indexer consumes."""

import uuid
from collections.abc import Sequence
from typing import Any

from cairn.events import Event, ResetBoundary, SessionCreated, SessionForked, TranscriptAppended
from cairn.indexer import store
from cairn.platform.consumer import Delivery, Handler
from cairn.text import index_terms, to_tsvector_literal

Connection = Any
SEARCHABLE_ROLES = ("user", "assistant")  # tool output and system text are stored, never indexed


async def on_appended(conn: Connection, event: TranscriptAppended, delivery: Delivery) -> Sequence[Event]:
    if event.role in SEARCHABLE_ROLES:
        await store.insert_message(
            conn,
            (
                uuid.UUID(event.tenant_id),
                event.agent_id,
                uuid.UUID(event.message_id),
                event.session_key,
                uuid.UUID(event.session_id),
                event.position,
                event.reset_index,
                event.role,
                event.chat_type,
                event.text,
                to_tsvector_literal(index_terms(event.text)),
                event.occurred_at,
                event.ingest_seq,
            ),
        )
    await store.advance(conn, event.tenant_id, event.agent_id, event.ingest_seq)
    return []


async def on_position(
    conn: Connection, event: ResetBoundary | SessionCreated | SessionForked, delivery: Delivery
) -> Sequence[Event]:
    """Events with nothing to index still carry an ingest position the index has now reached: a reset, a
    console thread's creation, a fork (sent after its copied entries)."""
    await store.advance(conn, event.tenant_id, event.agent_id, event.ingest_seq)
    return []


HANDLERS: dict[type, Handler] = {
    TranscriptAppended: on_appended,
    ResetBoundary: on_position,
    SessionCreated: on_position,
    SessionForked: on_position,
}
