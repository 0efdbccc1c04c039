"""One handler per event the indexer consumes."""

from collections.abc import Sequence
from typing import Any

from cairn.events import Event, ResetBoundary, SessionCreated, SessionForked, TranscriptAppended
from cairn.indexer import store
from cairn.platform.consumer import Delivery, Handler

Connection = Any


async def on_appended(conn: Connection, event: TranscriptAppended, delivery: Delivery) -> Sequence[Event]:
    if store.is_searchable(event):
        await store.insert_message(conn, store.message_row(event))
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
