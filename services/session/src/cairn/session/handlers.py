"""One handler per event the session service consumes: route, append, emit."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from cairn.events import (
    CompactionImminent,
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
from cairn.session import store
from cairn.session.domain import Window, crosses_compaction, estimate_tokens
from cairn.session.settings import SessionSettings

Connection = Any


def _created(event: Event, key: str, session: store.SessionRow, chat_type: ChatType, channel: str) -> list[Event]:
    if not session.created:
        return []
    return [
        SessionCreated(
            tenant_id=event.tenant_id,
            agent_id=event.agent_id,
            causation_id=event.event_id,
            session_key=key,
            session_id=session.session_id,
            chat_type=chat_type,
            channel=channel,
        )
    ]


def build_handlers(settings: SessionSettings) -> dict[type, Handler]:
    async def reset(
        conn: Connection,
        event: Event,
        key: str,
        reason: ResetReason,
        channel: str,
        chat_type: ChatType,
        external_id: str | None,
        occurred_at: datetime,
        ingest_seq: int,
    ) -> Sequence[Event]:
        tenant, agent = event.tenant_id, event.agent_id
        session = await store.lock_or_create(conn, tenant, agent, key, chat_type, channel)
        if await store.already_stored(conn, tenant, channel, external_id):
            return []
        tail = await store.window_tail(conn, tenant, session, settings.snapshot_messages)
        entry = store.Entry(
            "reset", channel, external_id, None, None, None, None, 0, occurred_at, utc_now(), ingest_seq
        )
        position, _ = await store.append(conn, tenant, session, entry, session.reset_index + 1)
        await store.advance_after_reset(conn, tenant, agent, key, position)
        boundary = ResetBoundary(
            tenant_id=tenant,
            agent_id=agent,
            causation_id=event.event_id,
            occurred_at=occurred_at,
            session_key=key,
            session_id=session.session_id,
            position=position,
            reason=reason,
            reset_index=session.reset_index + 1,
            closed_window_tail=tail,
            ingest_seq=ingest_seq,
        )
        return [*_created(event, key, session, chat_type, channel), boundary]

    async def on_message(conn: Connection, event: MessageReceived, delivery: Delivery) -> Sequence[Event]:
        msg, key = event.message, event.session_key
        command = is_reset_command(msg)
        if command is not None:
            return await reset(
                conn,
                event,
                key,
                command,
                msg.channel,
                msg.chat_type,
                msg.message_id,
                event.occurred_at,
                delivery.stream_seq,
            )
        tenant, agent = event.tenant_id, event.agent_id
        session = await store.lock_or_create(conn, tenant, agent, key, msg.chat_type, msg.channel)
        if await store.already_stored(conn, tenant, msg.channel, msg.message_id):
            return []
        tokens, size = estimate_tokens(msg.text), len(msg.text.encode())
        entry = store.Entry(
            "message",
            msg.channel,
            msg.message_id,
            msg.role,
            msg.text,
            msg.sender_name,
            msg.peer_id,
            tokens,
            event.occurred_at,
            event.recorded_at,
            delivery.stream_seq,
        )
        position, message_id = await store.append(conn, tenant, session, entry, session.reset_index)
        await store.advance_after_message(conn, tenant, agent, key, position, tokens, size)
        appended = TranscriptAppended(
            tenant_id=tenant,
            agent_id=agent,
            causation_id=event.event_id,
            occurred_at=event.occurred_at,
            session_key=key,
            session_id=session.session_id,
            position=position,
            reset_index=session.reset_index,
            message_id=message_id,
            external_id=msg.message_id,
            role=msg.role,
            text=msg.text,
            sender_name=msg.sender_name,
            peer_id=msg.peer_id,
            channel=msg.channel,
            chat_type=msg.chat_type,
            token_estimate=tokens,
            ingest_seq=delivery.stream_seq,
        )
        emitted: list[Event] = [*_created(event, key, session, msg.chat_type, msg.channel), appended]
        window = Window(session.window_tokens + tokens, session.window_bytes + size, session.compaction_flagged)
        if crosses_compaction(window, settings.compaction):
            await store.flag_compaction(conn, tenant, agent, key)
            emitted.append(
                CompactionImminent(
                    tenant_id=tenant,
                    agent_id=agent,
                    causation_id=event.event_id,
                    session_key=key,
                    session_id=session.session_id,
                    cycle=session.compaction_cycle,
                    estimated_tokens=window.tokens,
                    transcript_bytes=window.bytes,
                    threshold_tokens=settings.compaction.threshold_tokens,
                )
            )
        return emitted

    async def on_command(conn: Connection, event: SessionCommand, delivery: Delivery) -> Sequence[Event]:
        if event.command != "reset":
            return []  # console threads and forks arrive with the session work (issue 3)
        return await reset(
            conn,
            event,
            event.session_key,
            event.reason,
            "api",
            "direct",
            None,
            event.occurred_at,
            delivery.stream_seq,
        )

    return {MessageReceived: on_message, SessionCommand: on_command}
