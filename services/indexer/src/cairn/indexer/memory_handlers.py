"""The memory index's consumers: documents (`memory.document-changed`), remembered transcript turns
(`transcript.appended`, chunked later, debounced, by `memory_worker`) and agents' remember settings.
Separate from the full-text projection of messages, with a consumer of their own."""

import logging
import uuid
from collections.abc import Sequence
from typing import Any

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
from cairn.platform.consumer import Delivery, Handler

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
