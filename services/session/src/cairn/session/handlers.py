"""One handler per event the session service consumes: route to the session, append, emit.

Handlers work through the `Transcripts` port, so unit tests run them against an in-memory twin.
"""

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

from cairn.events import (
    AgentConfigured,
    CompactionImminent,
    Envelope,
    Event,
    MessageReceived,
    ResetBoundary,
    SessionCommand,
    SessionCreated,
    SessionForked,
    TranscriptAppended,
    utc_now,
)
from cairn.events.models import ChatType, ResetReason
from cairn.events.routing import ActiveMemoryCommand, is_active_memory_command, is_incognito, is_reset_command
from cairn.session.domain import (
    Window,
    crosses_compaction,
    estimate_tokens,
    is_background,
    stale_because,
    threshold_tokens,
)
from cairn.session.settings import SessionSettings
from cairn.session.store import CopiedMessage, Entry, ForkSource, SessionRow, Transcripts

log = logging.getLogger(__name__)


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
        activity = not is_background(key, msg.channel)
        emitted: list[Event] = _created(event, key, session, msg.chat_type, msg.channel)
        reason = stale_because(session.reset_policy, session.last_activity_at, event.occurred_at) if activity else None
        if reason is not None:  # the agent's daily or idle policy: close this session, continue in a new one
            request = ResetRequest(key, reason, msg.channel, msg.chat_type, None, event.occurred_at, ingest_seq)
            emitted.append(await self._close_window(store, event, session, request))
            session = await store.rotate(tenant, event.agent_id, key, str(uuid.uuid4()))
            emitted += _created(event, key, session, msg.chat_type, msg.channel)
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
            activity,
        )
        position, message_id = await store.append(tenant, session, entry)
        appended = TranscriptAppended(
            tenant_id=tenant, agent_id=event.agent_id, causation_id=event.event_id, occurred_at=event.occurred_at,
            session_key=key, session_id=session.session_id, position=position, reset_index=session.reset_index,
            message_id=message_id, external_id=msg.message_id, role=msg.role, text=msg.text,
            sender_name=msg.sender_name, peer_id=msg.peer_id, channel=msg.channel, chat_type=msg.chat_type,
            token_estimate=tokens, ingest_seq=ingest_seq,
        )  # fmt: skip
        emitted.append(appended)
        window = Window(
            session.window_tokens + tokens, session.window_bytes + len(msg.text.encode()), session.compaction_flagged
        )
        # cron and heartbeat sessions have no agent context to compact
        limits = (self.settings.compaction, session.context_window, session.compaction)
        if activity and crosses_compaction(window, *limits):
            await store.flag_compaction(tenant, session)
            emitted.append(CompactionImminent(
                tenant_id=tenant, agent_id=event.agent_id, causation_id=event.event_id, session_key=key,
                session_id=session.session_id, cycle=session.compaction_cycle, estimated_tokens=window.tokens,
                transcript_bytes=window.bytes, threshold_tokens=threshold_tokens(*limits),
                reset_index=session.reset_index, up_to_position=position,
            ))  # fmt: skip
        return emitted

    async def reset(self, store: Transcripts, source: Envelope, request: ResetRequest) -> list[Event]:
        tenant, key = source.tenant_id, request.session_key
        session = await store.open_session(tenant, source.agent_id, key, request.chat_type, request.channel)
        if await store.has_external_id(tenant, request.channel, request.external_id):
            return []
        boundary = await self._close_window(store, source, session, request)
        return [*_created(source, key, session, request.chat_type, request.channel), boundary]

    async def _close_window(
        self, store: Transcripts, source: Envelope, session: SessionRow, request: ResetRequest
    ) -> ResetBoundary:
        """Append a reset boundary; the event carries the closed window's last messages for the snapshot."""
        tail = await store.window_tail(source.tenant_id, session, self.settings.snapshot_messages)
        entry = Entry("reset", request.channel, request.external_id, request.occurred_at, utc_now(), request.ingest_seq)
        position, _ = await store.append(source.tenant_id, session, entry)
        return ResetBoundary(
            tenant_id=source.tenant_id, agent_id=source.agent_id, causation_id=source.event_id,
            occurred_at=request.occurred_at, session_key=request.session_key, session_id=session.session_id,
            position=position, reason=request.reason, reset_index=session.reset_index + 1, closed_window_tail=tail,
            ingest_seq=request.ingest_seq,
        )  # fmt: skip

    async def on_message(self, store: Transcripts, event: MessageReceived, ingest_seq: int) -> list[Event]:
        if is_incognito(event.session_key):
            # ingest keeps incognito threads in memory and never publishes them; should one come anyway
            # (an old ingest replica), it is still never written here
            log.error("message for incognito thread %s not stored: they live in memory only", event.session_key)
            return []
        switch = is_active_memory_command(event.message)
        if switch is not None:
            return await self.switch_active_memory(store, event, switch)
        command = is_reset_command(event.message)
        if command is None:
            return await self.append_message(store, event, ingest_seq)
        msg = event.message
        request = ResetRequest(
            event.session_key, command, msg.channel, msg.chat_type, msg.message_id, event.occurred_at, ingest_seq
        )
        return await self.reset(store, event, request)

    async def switch_active_memory(
        self, store: Transcripts, event: MessageReceived, command: ActiveMemoryCommand
    ) -> list[Event]:
        """`/active-memory on|off` turns recall before the reply on or off for the session; `status` changes
        nothing (the runtime answers it). The command is not conversation: it is never stored as a message."""
        msg, key = event.message, event.session_key
        session = await store.open_session(event.tenant_id, event.agent_id, key, msg.chat_type, msg.channel)
        if command != "status":
            await store.set_active_memory(event.tenant_id, session, command == "on")
        return _created(event, key, session, msg.chat_type, msg.channel)

    async def on_command(self, store: Transcripts, event: SessionCommand, ingest_seq: int) -> list[Event]:
        if event.incognito or is_incognito(event.session_key):
            return []  # incognito threads live in memory only (ingest never sends their commands)
        if event.command == "compaction":
            return await self.compacted(store, event)
        if event.command == "reset":
            request = ResetRequest(
                event.session_key, event.reason, "api", "direct", None, event.occurred_at, ingest_seq
            )
            return await self.reset(store, event, request)
        if event.session_id is None:  # ingest always names the new session
            return []
        if event.command == "fork":
            return await self.fork(store, event, ingest_seq)
        return await self.create(store, event, ingest_seq)

    async def compacted(self, store: Transcripts, event: SessionCommand) -> list[Event]:
        """The runtime compacted: the cycle closes, so compaction-imminent can fire again for the next one. A cycle
        it closes without compaction-imminent having fired (the runtime compacted on an overflow or by command,
        before cairn's estimate crossed the threshold) gets it now, forced: its flush is not skipped."""
        session = await store.find_session(event.tenant_id, event.agent_id, event.session_key)
        kept = (
            await store.find_message(event.tenant_id, session, event.first_kept_message_id)
            if (session is not None and event.first_kept_message_id is not None)
            else None
        )
        if session is None or kept is None or kept.reset_index != session.reset_index:
            # ingest checked both; a replay after erasure or a reset in between leaves nothing to close
            log.warning("compaction of %s: nothing to close (%s)", event.session_key, event.first_kept_message_id)
            return []
        emitted: list[Event] = []
        if not session.compaction_flagged and session.window_tokens > 0 and not is_background(event.session_key, ""):
            emitted.append(CompactionImminent(
                tenant_id=event.tenant_id, agent_id=event.agent_id, causation_id=event.event_id,
                session_key=event.session_key, session_id=session.session_id, cycle=session.compaction_cycle,
                estimated_tokens=session.window_tokens, transcript_bytes=session.window_bytes,
                threshold_tokens=threshold_tokens(self.settings.compaction, session.context_window, session.compaction),
                reset_index=session.reset_index, up_to_position=session.last_position, forced=True,
            ))  # fmt: skip
        await store.close_compaction(event.tenant_id, session, kept.up_to_position)
        return emitted

    async def _open_child(
        self, store: Transcripts, event: SessionCommand, session_id: str
    ) -> tuple[SessionRow, SessionRow | None]:
        """The new session with the id ingest chose, and the parent it comes from, when there is one."""
        tenant, agent = event.tenant_id, event.agent_id
        parent = await store.find_session(tenant, agent, event.parent_session_key) if event.parent_session_key else None
        if event.parent_session_key and parent is None:  # ingest checked it; only a replay can find it gone
            log.warning("session %s: parent %s not found, starting empty", event.session_key, event.parent_session_key)
        child = await store.create_session(
            tenant, agent, event.session_key, session_id, event.chat_type, event.channel,
            parent.session_id if parent else None,
        )  # fmt: skip
        return child, parent

    def _session_created(
        self, event: SessionCommand, child: SessionRow, parent: SessionRow | None, ingest_seq: int | None
    ) -> SessionCreated:
        return SessionCreated(
            tenant_id=event.tenant_id, agent_id=event.agent_id, causation_id=event.event_id,
            session_key=event.session_key, session_id=child.session_id, chat_type=event.chat_type,
            channel=event.channel, parent_session_id=parent.session_id if parent else None, ingest_seq=ingest_seq,
        )  # fmt: skip

    async def create(self, store: Transcripts, event: SessionCommand, ingest_seq: int) -> list[Event]:
        """A console thread: an empty session under the key and id ingest chose (a child when it has a parent)."""
        assert event.session_id is not None
        child, parent = await self._open_child(store, event, event.session_id)
        return [self._session_created(event, child, parent, ingest_seq)] if child.created else []

    async def fork(self, store: Transcripts, event: SessionCommand, ingest_seq: int) -> list[Event]:
        """A child session whose history is a copy of the parent's window (up to a message); the parent is
        untouched. `session.forked` comes last, so whoever has seen it has seen the copied entries."""
        assert event.session_id is not None
        child, parent = await self._open_child(store, event, event.session_id)
        if not child.created:
            return []
        if parent is None or event.parent_session_key is None:
            return [self._session_created(event, child, None, ingest_seq)]
        source = await self._fork_source(store, event, parent)
        copied = await store.copy_messages(event.tenant_id, parent, source, child, event.recorded_at, ingest_seq)
        forked = SessionForked(
            tenant_id=event.tenant_id, agent_id=event.agent_id, causation_id=event.event_id,
            session_key=event.session_key, session_id=child.session_id, parent_session_key=event.parent_session_key,
            parent_session_id=parent.session_id, from_position=source.up_to_position, ingest_seq=ingest_seq,
        )  # fmt: skip
        appended = [self._copied(event, child, message) for message in copied]
        return [self._session_created(event, child, parent, None), *appended, forked]

    @staticmethod
    async def _fork_source(store: Transcripts, event: SessionCommand, parent: SessionRow) -> ForkSource:
        """The parent's current window by default; up to `from_message_id`, in whichever window holds it."""
        if event.from_message_id is None:
            return ForkSource(parent.reset_index, parent.last_position)
        found = await store.find_message(event.tenant_id, parent, event.from_message_id)
        if found is None:  # ingest checked it; only a replay can find it gone: copy nothing rather than too much
            log.warning("fork %s: message %s not found in the parent", event.session_key, event.from_message_id)
            return ForkSource(parent.reset_index, 0)
        return found

    @staticmethod
    def _copied(event: SessionCommand, child: SessionRow, message: CopiedMessage) -> Event:
        """A copied entry carries no ingest position: the index reaches the fork's position only with
        `session.forked`, once every copy is indexed, not with the first copy."""
        return TranscriptAppended(
            tenant_id=event.tenant_id, agent_id=event.agent_id, causation_id=event.event_id,
            occurred_at=message.occurred_at, recorded_at=event.recorded_at, session_key=event.session_key,
            session_id=child.session_id, position=message.position, reset_index=0, message_id=message.message_id,
            role=message.role, text=message.text, sender_name=message.sender_name, peer_id=message.peer_id,
            channel=message.channel, chat_type=event.chat_type, token_estimate=message.token_estimate,
        )  # fmt: skip

    async def on_configured(self, store: Transcripts, event: AgentConfigured) -> list[Event]:
        """Keep what this service needs of the agent's config: context window, reset policies, retention."""
        await store.save_agent_settings(event.tenant_id, event.agent_id, event.version, event.config)
        return []
