"""Sessions and transcript entries: the `Transcripts` port and its Postgres implementation.

Every call runs inside the caller's tenant transaction; `open_session` locks the session row, so one
writer at a time allocates positions (gap-free, across replicas).
"""

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from cairn.events import AgentConfig, CompactionPolicy, ResetPolicy
from cairn.events.models import TranscriptLine
from cairn.session.domain import reset_policy_for

CREATE_SESSION = """
INSERT INTO session.sessions (tenant_id, agent_id, session_key, session_id, chat_type, channel, parent_session_id)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (tenant_id, agent_id, session_key) DO NOTHING
RETURNING session_id
"""
# The agent's context window and reset policy ride along: no second query per message.
LOCK_COLUMNS = """s.session_id, s.session_key, s.chat_type, s.last_position, s.reset_index, s.window_tokens,
    s.window_bytes, s.compaction_flagged, s.compaction_cycle, s.last_activity_at, a.context_window, a.reset_policy,
    a.reset_by_type, a.compaction"""
LOCK_SESSION = f"""
SELECT {LOCK_COLUMNS}
FROM session.sessions s
LEFT JOIN session.agent_settings a ON a.tenant_id = s.tenant_id AND a.agent_id = s.agent_id
WHERE s.tenant_id = $1 AND s.agent_id = $2 AND s.session_key = $3
FOR UPDATE OF s
"""
REMEMBER_ID = """
INSERT INTO session.key_sessions (tenant_id, agent_id, session_key, session_id) VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING
"""
# A daily or idle reset: the key now points to a new, empty session; the old one keeps its transcript.
ROTATE_SESSION = """
UPDATE session.sessions SET session_id = $4, last_position = 0, reset_index = 0, window_tokens = 0, window_bytes = 0,
    compaction_flagged = false, compaction_cycle = 0, message_count = 0, last_activity_at = NULL,
    parent_session_id = NULL, created_at = now(), updated_at = now()
WHERE tenant_id = $1 AND agent_id = $2 AND session_key = $3
"""
# Our message id (a uuid) or the adapter's id.
FIND_MESSAGE = """
SELECT position, reset_index FROM session.entries
WHERE tenant_id = $1 AND session_id = $2 AND kind = 'message' AND (message_id = $3 OR external_id = $4)
"""
# A fork's history: the parent window's messages up to a position, renumbered from 1 under new ids. The
# adapter ids stay with the parent (they are its idempotency keys); event time is kept.
COPY_WINDOW = """
INSERT INTO session.entries (tenant_id, session_id, position, kind, message_id, channel, external_id, role, text,
    sender_name, peer_id, reset_index, token_estimate, occurred_at, recorded_at, ingest_seq)
SELECT $1, $5, row_number() OVER (ORDER BY position), 'message', gen_random_uuid(), channel, NULL, role, text,
    sender_name, peer_id, 0, token_estimate, occurred_at, $6, $7
FROM session.entries
WHERE tenant_id = $1 AND session_id = $2 AND reset_index = $3 AND kind = 'message' AND position <= $4
RETURNING position, message_id, channel, role, text, sender_name, peer_id, token_estimate, occurred_at
"""
ADVANCE_COPY = """
UPDATE session.sessions SET last_position = $3, message_count = $3, window_tokens = $4, window_bytes = $5,
    updated_at = now()
WHERE tenant_id = $1 AND session_id = $2
"""
# Versions only move forward: a re-published older config never overwrites a newer one.
SAVE_AGENT_SETTINGS = """
INSERT INTO session.agent_settings (tenant_id, agent_id, context_window, reset_policy, config_version, reset_by_type,
    dormant_after, archive_after, compaction)
VALUES ($1, $2, $3, $4::jsonb, $5, $6::jsonb, $7, $8, $9::jsonb)
ON CONFLICT (tenant_id, agent_id) DO UPDATE
SET context_window = excluded.context_window, reset_policy = excluded.reset_policy,
    config_version = excluded.config_version, reset_by_type = excluded.reset_by_type,
    dormant_after = excluded.dormant_after, archive_after = excluded.archive_after, compaction = excluded.compaction,
    updated_at = now()
WHERE session.agent_settings.config_version <= excluded.config_version
"""
FIND_EXTERNAL = "SELECT 1 FROM session.entries WHERE tenant_id = $1 AND channel = $2 AND external_id = $3"
INSERT_ENTRY = """
INSERT INTO session.entries (tenant_id, session_id, position, kind, message_id, channel, external_id, role, text,
    sender_name, peer_id, reset_index, token_estimate, occurred_at, recorded_at, ingest_seq)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
"""
ADVANCE_MESSAGE = """
UPDATE session.sessions SET last_position = $3, window_tokens = window_tokens + $4, window_bytes = window_bytes + $5,
    message_count = message_count + 1, updated_at = now(), status = 'active',
    last_activity_at = CASE WHEN $6 THEN greatest(last_activity_at, $7) ELSE last_activity_at END
WHERE tenant_id = $1 AND session_id = $2
"""
ADVANCE_RESET = """
UPDATE session.sessions SET last_position = $3, reset_index = reset_index + 1, window_tokens = 0, window_bytes = 0,
    compaction_flagged = false, updated_at = now()
WHERE tenant_id = $1 AND session_id = $2
"""
# Per key: a daily or idle reset, which moves the key to a new id, keeps it.
SET_ACTIVE_MEMORY = "UPDATE session.sessions SET active_memory = $3 WHERE tenant_id = $1 AND session_id = $2"
FLAG_COMPACTION = "UPDATE session.sessions SET compaction_flagged = true WHERE tenant_id = $1 AND session_id = $2"
# The runtime compacted its context: a new cycle starts, and the live window is what it kept.
CLOSE_COMPACTION = """
UPDATE session.sessions s SET compaction_cycle = compaction_cycle + 1, compaction_flagged = false,
    window_tokens = kept.tokens, window_bytes = kept.bytes, updated_at = now()
FROM (
    SELECT coalesce(sum(token_estimate), 0) AS tokens, coalesce(sum(octet_length(text)), 0) AS bytes
    FROM session.entries
    WHERE tenant_id = $1 AND session_id = $2 AND reset_index = $3 AND kind = 'message' AND position >= $4
) kept
WHERE s.tenant_id = $1 AND s.session_id = $2
"""
WINDOW_TAIL = """
SELECT message_id, role, text, sender_name, occurred_at FROM (
    -- each text cut at 4000 characters: 15 of them stay far below NATS's 1 MB message limit, and a
    -- snapshot needs no more than history shows
    SELECT message_id, role, left(text, 4000) AS text, sender_name, occurred_at, position FROM session.entries
    WHERE tenant_id = $1 AND session_id = $2 AND reset_index = $3 AND kind = 'message'
      AND role IN ('user', 'assistant') AND left(ltrim(text), 1) <> '/'  -- commands are not conversation
    ORDER BY position DESC LIMIT $4
) tail ORDER BY position
"""


@dataclass(frozen=True)
class SessionRow:
    session_id: str
    last_position: int
    reset_index: int
    window_tokens: int
    window_bytes: int
    compaction_flagged: bool
    compaction_cycle: int
    created: bool
    context_window: int | None = None  # the agent's, when it configured one
    reset_policy: ResetPolicy | None = None  # the agent's for this kind of session, when it configured one
    last_activity_at: datetime | None = None
    compaction: CompactionPolicy | None = None  # the agent's thresholds, when it configured any


@dataclass(frozen=True)
class Entry:
    """A transcript entry to append; a reset boundary has no role or text."""

    kind: str  # 'message' | 'reset'
    channel: str
    external_id: str | None
    occurred_at: datetime
    recorded_at: datetime
    ingest_seq: int | None
    role: str | None = None
    text: str | None = None
    sender_name: str | None = None
    peer_id: str | None = None
    token_estimate: int = 0
    activity: bool = True  # counts towards freshness (not a heartbeat or cron message)


@dataclass(frozen=True)
class CopiedMessage:
    """A message as copied into a forked session: new position and id, the parent's text and event time."""

    position: int
    message_id: str
    channel: str
    role: str
    text: str
    sender_name: str | None
    peer_id: str | None
    token_estimate: int
    occurred_at: datetime


@dataclass(frozen=True)
class ForkSource:
    """Which of the parent's entries a fork copies: the messages of one window up to a position."""

    reset_index: int
    up_to_position: int


class Transcripts(Protocol):
    async def open_session(self, tenant: str, agent: str, key: str, chat_type: str, channel: str) -> SessionRow:
        """The session under `key`, locked for this unit of work; created with a new id when there is none."""
        ...

    async def has_external_id(self, tenant: str, channel: str, external_id: str | None) -> bool: ...

    async def append(self, tenant: str, session: SessionRow, entry: Entry) -> tuple[int, str]:
        """Append at the next position and advance the session's window; returns (position, message id)."""
        ...

    async def flag_compaction(self, tenant: str, session: SessionRow) -> None: ...

    async def set_active_memory(self, tenant: str, session: SessionRow, enabled: bool) -> None:
        """Turn recall before the reply on or off for the session's key (`/active-memory on|off`)."""
        ...

    async def rotate(self, tenant: str, agent: str, key: str, session_id: str) -> SessionRow:
        """Point `key` at a new, empty session `session_id`; returns it (locked, `created` True)."""
        ...

    async def close_compaction(self, tenant: str, session: SessionRow, first_kept_position: int) -> None:
        """Start the next compaction cycle; the live window is the messages from `first_kept_position`."""
        ...

    async def window_tail(self, tenant: str, session: SessionRow, limit: int) -> tuple[TranscriptLine, ...]: ...

    async def find_session(self, tenant: str, agent: str, key: str) -> SessionRow | None:
        """The session under `key`, locked for this unit of work; None when there is none."""
        ...

    async def create_session(
        self, tenant: str, agent: str, key: str, session_id: str, chat_type: str, channel: str, parent_id: str | None
    ) -> SessionRow:
        """A session with exactly this id, locked; `created` is False when the key already had one."""
        ...

    async def find_message(self, tenant: str, session: SessionRow, message_id: str) -> ForkSource | None:
        """Where a message (our id or the adapter's) sits: its window and position."""
        ...

    async def copy_messages(
        self,
        tenant: str,
        parent: SessionRow,
        source: ForkSource,
        child: SessionRow,
        recorded_at: datetime,
        ingest_seq: int,
    ) -> list[CopiedMessage]:
        """Copy the source's messages into the empty `child` from position 1, in order; advance the child."""
        ...

    async def save_agent_settings(self, tenant: str, agent: str, version: int, config: AgentConfig) -> None:
        """Keep what the session service needs of an agent's config; an older version never wins."""
        ...


class PostgresTranscripts:
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def open_session(self, tenant: str, agent: str, key: str, chat_type: str, channel: str) -> SessionRow:
        return await self.create_session(tenant, agent, key, str(uuid.uuid4()), chat_type, channel, None)

    async def find_session(self, tenant: str, agent: str, key: str) -> SessionRow | None:
        row = await self._conn.fetchrow(LOCK_SESSION, tenant, agent, key)
        return session_row(row, created=False) if row else None

    async def create_session(
        self, tenant: str, agent: str, key: str, session_id: str, chat_type: str, channel: str, parent_id: str | None
    ) -> SessionRow:
        parent = uuid.UUID(parent_id) if parent_id else None
        created = await self._conn.fetchval(
            CREATE_SESSION, tenant, agent, key, uuid.UUID(session_id), chat_type, channel, parent
        )
        if created is not None:
            await self._conn.execute(REMEMBER_ID, tenant, agent, key, created)
        return session_row(await self._conn.fetchrow(LOCK_SESSION, tenant, agent, key), created=created is not None)

    async def find_message(self, tenant: str, session: SessionRow, message_id: str) -> ForkSource | None:
        row = await self._conn.fetchrow(
            FIND_MESSAGE, tenant, uuid.UUID(session.session_id), _as_uuid(message_id), message_id
        )
        return ForkSource(row["reset_index"], row["position"]) if row else None

    async def copy_messages(
        self,
        tenant: str,
        parent: SessionRow,
        source: ForkSource,
        child: SessionRow,
        recorded_at: datetime,
        ingest_seq: int,
    ) -> list[CopiedMessage]:
        child_id = uuid.UUID(child.session_id)
        rows = await self._conn.fetch(
            COPY_WINDOW, tenant, uuid.UUID(parent.session_id), source.reset_index, source.up_to_position, child_id,
            recorded_at, ingest_seq,
        )  # fmt: skip
        copied = sorted(
            (CopiedMessage(r["position"], str(r["message_id"]), r["channel"], r["role"], r["text"], r["sender_name"],
                           r["peer_id"], r["token_estimate"], r["occurred_at"]) for r in rows),
            key=lambda c: c.position,
        )  # fmt: skip
        tokens, size = sum(c.token_estimate for c in copied), sum(len(c.text.encode()) for c in copied)
        await self._conn.execute(ADVANCE_COPY, tenant, child_id, len(copied), tokens, size)
        return copied

    async def save_agent_settings(self, tenant: str, agent: str, version: int, config: AgentConfig) -> None:
        by_type = json.dumps({kind: policy.model_dump() for kind, policy in config.reset_policies().items()})
        retention = config.retention
        await self._conn.execute(
            SAVE_AGENT_SETTINGS, tenant, agent, config.context_window, config.reset.model_dump_json(), version, by_type,
            _days(retention.dormant_after_days), _days(retention.archive_after_days),
            config.compaction.model_dump_json(),
        )  # fmt: skip

    async def has_external_id(self, tenant: str, channel: str, external_id: str | None) -> bool:
        if external_id is None:
            return False
        return await self._conn.fetchval(FIND_EXTERNAL, tenant, channel, external_id) is not None

    async def append(self, tenant: str, session: SessionRow, entry: Entry) -> tuple[int, str]:
        position, message_id, session_id = session.last_position + 1, uuid.uuid4(), uuid.UUID(session.session_id)
        reset_index = session.reset_index + (1 if entry.kind == "reset" else 0)
        await self._conn.execute(
            INSERT_ENTRY, tenant, session_id, position, entry.kind, message_id, entry.channel, entry.external_id,
            entry.role, entry.text, entry.sender_name, entry.peer_id, reset_index, entry.token_estimate,
            entry.occurred_at, entry.recorded_at, entry.ingest_seq,
        )  # fmt: skip
        if entry.kind == "reset":
            await self._conn.execute(ADVANCE_RESET, tenant, session_id, position)
        else:
            size = len((entry.text or "").encode())
            await self._conn.execute(
                ADVANCE_MESSAGE, tenant, session_id, position, entry.token_estimate, size, entry.activity,
                entry.occurred_at,
            )  # fmt: skip
        return position, str(message_id)

    async def flag_compaction(self, tenant: str, session: SessionRow) -> None:
        await self._conn.execute(FLAG_COMPACTION, tenant, uuid.UUID(session.session_id))

    async def set_active_memory(self, tenant: str, session: SessionRow, enabled: bool) -> None:
        await self._conn.execute(SET_ACTIVE_MEMORY, tenant, uuid.UUID(session.session_id), enabled)

    async def close_compaction(self, tenant: str, session: SessionRow, first_kept_position: int) -> None:
        await self._conn.execute(
            CLOSE_COMPACTION, tenant, uuid.UUID(session.session_id), session.reset_index, first_kept_position
        )

    async def rotate(self, tenant: str, agent: str, key: str, session_id: str) -> SessionRow:
        await self._conn.execute(ROTATE_SESSION, tenant, agent, key, uuid.UUID(session_id))
        await self._conn.execute(REMEMBER_ID, tenant, agent, key, uuid.UUID(session_id))
        return session_row(await self._conn.fetchrow(LOCK_SESSION, tenant, agent, key), created=True)

    async def window_tail(self, tenant: str, session: SessionRow, limit: int) -> tuple[TranscriptLine, ...]:
        rows = await self._conn.fetch(WINDOW_TAIL, tenant, uuid.UUID(session.session_id), session.reset_index, limit)
        return tuple(
            TranscriptLine(message_id=str(r["message_id"]), role=r["role"], text=r["text"],
                           sender_name=r["sender_name"], occurred_at=r["occurred_at"])
            for r in rows
        )  # fmt: skip


def session_row(row: Any, created: bool) -> SessionRow:
    default = ResetPolicy.model_validate_json(row["reset_policy"]) if row["reset_policy"] else None
    by_kind = {k: ResetPolicy.model_validate(v) for k, v in json.loads(row["reset_by_type"] or "{}").items()}
    return SessionRow(
        str(row["session_id"]), row["last_position"], row["reset_index"], row["window_tokens"], row["window_bytes"],
        row["compaction_flagged"], row["compaction_cycle"], created, row["context_window"],
        reset_policy_for(default, by_kind, row["chat_type"], row["session_key"]), row["last_activity_at"],
        CompactionPolicy.model_validate_json(row["compaction"]) if row["compaction"] else None,
    )  # fmt: skip


def _days(days: float | None) -> timedelta | None:
    return timedelta(days=days) if days is not None else None


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None
