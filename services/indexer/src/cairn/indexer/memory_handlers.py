"""The memory index's consumers: documents (`memory.document-changed`), remembered transcript turns
(`transcript.appended`, chunked later, debounced, by `memory_worker`) and agents' remember settings.
Separate from the full-text projection of messages, with a consumer of their own.

Transcript events come in batches of many tenants (`MemoryTranscripts`): a batch's turns, debounce marks and
positions are written in three statements, as the per-event handlers would leave them one event at a time.
"""

import logging
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from cairn.delivery.consumer import Delivery, Handler, Unit
from cairn.events import (
    AgentConfigured,
    DocumentChanged,
    Event,
    ResetBoundary,
    SessionCreated,
    SessionForked,
    TranscriptAppended,
)
from cairn.memindex import MemoryIndex, store
from cairn.memindex.transcripts import Turn, clean_text, is_remembered_turn, remembers

log = logging.getLogger(__name__)
CONSUMER = "memory-index"


def build_memory_handlers(index: MemoryIndex) -> dict[type, Handler]:
    delays = (index.settings.debounce_s, index.settings.max_delay_s)

    async def on_document_changed(conn: Any, event: DocumentChanged, delivery: Delivery) -> Sequence[Event]:
        await store.advance(conn, uuid.UUID(event.tenant_id), event.agent_id, event.ingest_seq)
        if event.change == "deleted":
            await index.delete_document(conn, event.tenant_id, event.agent_id, event.path)
        else:
            await index.put_document(
                conn, event.tenant_id, event.agent_id, event.path, event.version, event.text, event.occurred_at
            )
        return []

    async def on_appended(conn: Any, event: TranscriptAppended, delivery: Delivery) -> Sequence[Event]:
        """Keep a remembered turn (redacted) and push its session's debounce deadline back."""
        tenant, session_id = uuid.UUID(event.tenant_id), uuid.UUID(event.session_id)
        await store.advance(conn, tenant, event.agent_id, event.ingest_seq)
        if not is_remembered_turn(event):
            return []
        turn = Turn(
            event.position, event.reset_index, event.message_id, event.role, event.sender_name,
            clean_text(event.text), event.occurred_at, event.external_id,
        )  # fmt: skip
        await store.add_turn(conn, tenant, event.agent_id, session_id, event.session_key, turn)
        await store.mark_pending(
            conn, tenant, event.agent_id, (session_id, event.session_key), delays, event.ingest_seq
        )
        return []

    async def on_position(
        conn: Any, event: ResetBoundary | SessionCreated | SessionForked, delivery: Delivery
    ) -> Sequence[Event]:
        """Nothing to index, but a position the memory index has now reached (read-your-writes)."""
        await store.advance(conn, uuid.UUID(event.tenant_id), event.agent_id, event.ingest_seq)
        return []

    async def on_configured(conn: Any, event: AgentConfigured, delivery: Delivery) -> Sequence[Event]:
        """Turning remembering off removes the agent's transcript chunks; turning it on indexes them again."""
        tenant = uuid.UUID(event.tenant_id)
        await store.advance(conn, tenant, event.agent_id, delivery.stream_seq)  # read from the ingest stream
        was = await store.remembers(conn, tenant, event.agent_id)
        now = await store.save_remember(conn, tenant, event.agent_id, remembers(event.config), event.version)
        if now is None or now == was:
            return []
        if not now:
            removed = await store.forget_sessions(conn, tenant, event.agent_id)
            log.info("agent %s stopped remembering: %d transcript chunks removed", event.agent_id, removed)
        else:
            for session_id, key in await store.agent_sessions(conn, tenant, event.agent_id):
                await store.mark_pending(conn, tenant, event.agent_id, (session_id, key), (0.0, 0.0))
        return []

    return {
        DocumentChanged: on_document_changed,
        TranscriptAppended: on_appended,
        AgentConfigured: on_configured,
        ResetBoundary: on_position,
        SessionCreated: on_position,
        SessionForked: on_position,
    }


TRANSCRIPT_EVENTS = frozenset({TranscriptAppended, ResetBoundary, SessionCreated, SessionForked})


class MemoryTranscripts:
    """The transcript consumer's handlers for a whole fetched batch: what `on_appended` and `on_position` do,
    buffered, then written set-based before the commit (every row names its tenant)."""

    across_tenants = True

    def __init__(self, index: MemoryIndex) -> None:
        self._delays = (index.settings.debounce_s, index.settings.max_delay_s)

    def handles(self, event: Event) -> bool:
        return type(event) in TRANSCRIPT_EVENTS

    def begin(self, conn: Any, events: Sequence[Event]) -> Unit:
        return _TranscriptBatch(conn, self._delays)


class _TranscriptBatch:
    def __init__(self, conn: Any, delays: tuple[float, float]) -> None:
        self._conn, self._delays = conn, delays
        self._turns: list[tuple[Any, ...]] = []
        self._pending: dict[tuple[uuid.UUID, uuid.UUID], store.Pending] = {}  # (tenant, session) → its mark
        self._reached: dict[tuple[uuid.UUID, str], int] = {}  # (tenant, agent) → highest ingest position

    async def handle(self, event: Event, delivery: Delivery) -> Sequence[Event]:
        assert isinstance(event, TranscriptAppended | ResetBoundary | SessionCreated | SessionForked)
        tenant = uuid.UUID(event.tenant_id)
        if event.ingest_seq is not None:
            agent = (tenant, event.agent_id)
            self._reached[agent] = max(event.ingest_seq, self._reached.get(agent, event.ingest_seq))
        if isinstance(event, TranscriptAppended) and is_remembered_turn(event):
            self._remember(tenant, event)
        return []

    def _remember(self, tenant: uuid.UUID, event: TranscriptAppended) -> None:
        session_id = uuid.UUID(event.session_id)
        turn = Turn(
            event.position, event.reset_index, event.message_id, event.role, event.sender_name,
            clean_text(event.text), event.occurred_at, event.external_id,
        )  # fmt: skip
        self._turns.append((tenant, event.agent_id, session_id, event.session_key, turn))
        # the first mark of a session inserts its row (agent, key); later ones only lower its first position
        mark = self._pending.get((tenant, session_id))
        if mark is None:
            self._pending[(tenant, session_id)] = store.Pending(event.agent_id, event.session_key, event.ingest_seq)
        elif event.ingest_seq is not None and (mark.first_seq is None or event.ingest_seq < mark.first_seq):
            self._pending[(tenant, session_id)] = replace(mark, first_seq=event.ingest_seq)

    async def complete(self) -> None:
        await store.write_transcript_batch(self._conn, self._turns, self._pending, self._delays, self._reached)
