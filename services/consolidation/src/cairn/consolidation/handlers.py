"""One handler per consumed event: decide with `domain`, persist through the `MemoryStore` port, and
return the events to emit (the projection keeps them in its outbox and publishes them after commit)."""

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from cairn.consolidation.domain import (
    SNAPSHOT_MESSAGES,
    Skipped,
    document_changed,
    next_version,
    outcome_of,
    plan_write,
    refusal,
    render_snapshot,
    snapshot_lines,
    snapshot_path,
)
from cairn.consolidation.flush import flushes
from cairn.consolidation.store import MemoryStore, PostgresStore
from cairn.delivery.consumer import Delivery, Handler, PoisonEvent
from cairn.events import CompactionImminent, Envelope, Event, MemoryWriteRequested, ResetBoundary

log = logging.getLogger(__name__)

# Resets of one agent within one minute are few; past this many something is replaying in a loop.
MAX_SNAPSHOTS_PER_MINUTE = 100

E = TypeVar("E", bound=Envelope)
StoreHandler = Callable[[MemoryStore, E], Awaitable[Sequence[Event]]]
# Handlers that also need the stream position of the event they apply.
PositionedHandler = Callable[[MemoryStore, E, int], Awaitable[Sequence[Event]]]


async def on_reset_boundary(store: MemoryStore, event: ResetBoundary, keep: int = SNAPSHOT_MESSAGES) -> Sequence[Event]:
    lines = snapshot_lines(event.closed_window_tail, keep)
    if not lines:
        log.info("reset of %s closed a window without user/assistant messages: no snapshot", event.session_key)
        return ()
    path = await free_snapshot_path(store, event)
    write = next_version(None, path, render_snapshot(event, lines))
    await store.save_document(event.tenant_id, event.agent_id, write)
    return (document_changed(event, write, event.ingest_seq),)


async def free_snapshot_path(store: MemoryStore, event: ResetBoundary) -> str:
    for attempt in range(1, MAX_SNAPSHOTS_PER_MINUTE + 1):
        path = snapshot_path(event.occurred_at, attempt)
        if await store.get_document(event.tenant_id, event.agent_id, path) is None:
            return path
    raise RuntimeError(f"{MAX_SNAPSHOTS_PER_MINUTE} snapshots exist already for {snapshot_path(event.occurred_at)}")


async def on_compaction_imminent(store: MemoryStore, event: CompactionImminent) -> Sequence[Event]:
    """The cycle's flush is due; the flush worker does it. Cron and incognito sessions have no flush (the session
    service does not emit it for them; an event from an older replica is still not flushed)."""
    if not flushes(event.session_key):
        log.info("no flush for %s: cron and incognito sessions keep no notes", event.session_key)
        return ()
    if not await store.record_flush_due(event):
        log.info("flush of %s cycle %d was already due", event.session_key, event.cycle)
    return ()


async def on_memory_write_requested(store: MemoryStore, event: MemoryWriteRequested, position: int) -> Sequence[Event]:
    """Apply the write as the next version, or record why not; either way the outcome is kept under the
    request's id. `position` is the request's CAIRN_INGEST sequence, carried on to the change."""
    problem = refusal(event)
    if problem is not None:
        raise PoisonEvent(f"memory write {event.mode} {event.path!r}: {problem}")
    plan = plan_write(await store.get_document(event.tenant_id, event.agent_id, event.path), event)
    await store.record_outcome(event.tenant_id, event.agent_id, outcome_of(event, plan))
    if isinstance(plan, Skipped):
        log.info("memory write %s (%s %s) not applied: %s", event.event_id, event.mode, event.path, plan.reason)
        return ()
    await store.save_document(event.tenant_id, event.agent_id, plan)
    return (document_changed(event, plan, position),)


def bind(handler: StoreHandler[E], store_for: Callable[[Any], MemoryStore] = PostgresStore) -> Handler:
    """Adapt a store handler to the projection's `(conn, event, delivery)` signature."""

    async def handle(conn: Any, event: E, delivery: Delivery) -> Sequence[Event]:
        return await handler(store_for(conn), event)

    return handle


def bind_at(handler: PositionedHandler[E], store_for: Callable[[Any], MemoryStore] = PostgresStore) -> Handler:
    """Like `bind`, for a handler that also takes the event's stream sequence."""

    async def handle(conn: Any, event: E, delivery: Delivery) -> Sequence[Event]:
        return await handler(store_for(conn), event, delivery.stream_seq)

    return handle
