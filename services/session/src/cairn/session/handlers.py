"""One handler per event the session service consumes: route to the session, append, emit.

Handlers work through the `Transcripts` port, so unit tests run them against an in-memory twin.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cairn.events import (
    CompactionImminent,
    Envelope,
    Event,
    MessageReceived,
    ResetBoundary,
    SessionCommand,
    SessionCreated,
    TranscriptAppended,
    utc_now,
)
from cairn.events.models import ChatType, ResetReason
from cairn.events.routing import is_reset_command
from cairn.platform.consumer import Delivery, Handler
from cairn.session.domain import Window, crosses_compaction, estimate_tokens
from cairn.session.settings import SessionSettings
from cairn.session.store import Entry, PostgresTranscripts, SessionRow, Transcripts


@dataclass(frozen=True)
class ResetRequest:
    """A reset from a `/new` or `/reset` message or from the API, whatever its origin."""

    session_key: str
    reason: ResetReason
    channel: str
    chat_type: ChatType
    external_id: str | None
    occurred_at: datetime
    ingest_seq: int


def _created(source: Envelope, key: str, session: SessionRow, chat_type: ChatType, channel: str) -> list[Event]:
    if not session.created:
        return []
    return [
        SessionCreated(
            tenant_id=source.tenant_id,
            agent_id=source.agent_id,
            causation_id=source.event_id,
            session_key=key,
            session_id=session.session_id,
            chat_type=chat_type,
            channel=channel,
        )
    ]


class SessionHandlers:
    def __init__(self, settings: SessionSettings) -> None:
        self.settings = settings

    async def append_message(self, store: Transcripts, event: MessageReceived, ingest_seq: int) -> list[Event]:
        msg, key, tenant = event.message, event.session_key, event.tenant_id
        session = await store.open_session(tenant, event.agent_id, key, msg.chat_type, msg.channel)
        if await store.has_external_id(tenant, msg.channel, msg.message_id):
            return []  # a re-send of a stored message
        tokens = estimate_tokens(msg.text)
        entry = Entry(
            "message",
            msg.channel,
            msg.message_id,
            event.occurred_at,
            event.recorded_at,
            ingest_seq,
            msg.role,
            msg.text,
            msg.sender_name,
            msg.peer_id,
            tokens,
        )
        position, message_id = await store.append(tenant, session, entry)
        appended = TranscriptAppended(
            tenant_id=tenant, agent_id=event.agent_id, causation_id=event.event_id, occurred_at=event.occurred_at,
            session_key=key, session_id=session.session_id, position=position, reset_index=session.reset_index,
            message_id=message_id, external_id=msg.message_id, role=msg.role, text=msg.text,
            sender_name=msg.sender_name, peer_id=msg.peer_id, channel=msg.channel, chat_type=msg.chat_type,
            token_estimate=tokens, ingest_seq=ingest_seq,
        )  # fmt: skip
        emitted = [*_created(event, key, session, msg.chat_type, msg.channel), appended]
        window = Window(
            session.window_tokens + tokens, session.window_bytes + len(msg.text.encode()), session.compaction_flagged
        )
        if crosses_compaction(window, self.settings.compaction):
            await store.flag_compaction(tenant, session)
            emitted.append(CompactionImminent(
                tenant_id=tenant, agent_id=event.agent_id, causation_id=event.event_id, session_key=key,
                session_id=session.session_id, cycle=session.compaction_cycle, estimated_tokens=window.tokens,
                transcript_bytes=window.bytes, threshold_tokens=self.settings.compaction.threshold_tokens,
            ))  # fmt: skip
        return emitted

    async def reset(self, store: Transcripts, source: Envelope, request: ResetRequest) -> list[Event]:
        tenant, key = source.tenant_id, request.session_key
        session = await store.open_session(tenant, source.agent_id, key, request.chat_type, request.channel)
        if await store.has_external_id(tenant, request.channel, request.external_id):
            return []
        tail = await store.window_tail(tenant, session, self.settings.snapshot_messages)
        entry = Entry("reset", request.channel, request.external_id, request.occurred_at, utc_now(), request.ingest_seq)
        position, _ = await store.append(tenant, session, entry)
        boundary = ResetBoundary(
            tenant_id=tenant, agent_id=source.agent_id, causation_id=source.event_id,
            occurred_at=request.occurred_at, session_key=key, session_id=session.session_id, position=position,
            reason=request.reason, reset_index=session.reset_index + 1, closed_window_tail=tail,
            ingest_seq=request.ingest_seq,
        )  # fmt: skip
        return [*_created(source, key, session, request.chat_type, request.channel), boundary]

    async def on_message(self, store: Transcripts, event: MessageReceived, ingest_seq: int) -> list[Event]:
        command = is_reset_command(event.message)
        if command is None:
            return await self.append_message(store, event, ingest_seq)
        msg = event.message
        request = ResetRequest(
            event.session_key, command, msg.channel, msg.chat_type, msg.message_id, event.occurred_at, ingest_seq
        )
        return await self.reset(store, event, request)

    async def on_command(self, store: Transcripts, event: SessionCommand, ingest_seq: int) -> list[Event]:
        if event.command != "reset":
            return []  # console threads and forks arrive with the session work (issue 3)
        request = ResetRequest(event.session_key, event.reason, "api", "direct", None, event.occurred_at, ingest_seq)
        return await self.reset(store, event, request)


def build_handlers(
    settings: SessionSettings, store_for: Callable[[Any], Transcripts] = PostgresTranscripts
) -> dict[type, Handler]:
    """The projection's handlers: each binds a connection to the store and passes the ingest position."""
    handlers = SessionHandlers(settings)

    async def on_message(conn: Any, event: MessageReceived, delivery: Delivery) -> Sequence[Event]:
        return await handlers.on_message(store_for(conn), event, delivery.stream_seq)

    async def on_command(conn: Any, event: SessionCommand, delivery: Delivery) -> Sequence[Event]:
        return await handlers.on_command(store_for(conn), event, delivery.stream_seq)

    return {MessageReceived: on_message, SessionCommand: on_command}
