"""Sessions and transcript entries: the `Transcripts` port and its Postgres implementation.

Every call runs inside the caller's tenant transaction; `open_session` locks the session row, so one
writer at a time allocates positions (gap-free, across replicas).
"""

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from cairn.events.models import TranscriptLine

CREATE_SESSION = """
INSERT INTO session.sessions (tenant_id, agent_id, session_key, session_id, chat_type, channel)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (tenant_id, agent_id, session_key) DO NOTHING
RETURNING session_id
"""
LOCK_SESSION = """
SELECT session_id, last_position, reset_index, window_tokens, window_bytes, compaction_flagged, compaction_cycle
FROM session.sessions WHERE tenant_id = $1 AND agent_id = $2 AND session_key = $3
FOR UPDATE
"""
FIND_EXTERNAL = "SELECT 1 FROM session.entries WHERE tenant_id = $1 AND channel = $2 AND external_id = $3"
INSERT_ENTRY = """
INSERT INTO session.entries (tenant_id, session_id, position, kind, message_id, channel, external_id, role, text,
    sender_name, peer_id, reset_index, token_estimate, occurred_at, recorded_at, ingest_seq)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
"""
ADVANCE_MESSAGE = """
UPDATE session.sessions SET last_position = $3, window_tokens = window_tokens + $4, window_bytes = window_bytes + $5,
    message_count = message_count + 1, updated_at = now()
WHERE tenant_id = $1 AND session_id = $2
"""
ADVANCE_RESET = """
UPDATE session.sessions SET last_position = $3, reset_index = reset_index + 1, window_tokens = 0, window_bytes = 0,
    compaction_flagged = false, updated_at = now()
WHERE tenant_id = $1 AND session_id = $2
"""
FLAG_COMPACTION = "UPDATE session.sessions SET compaction_flagged = true WHERE tenant_id = $1 AND session_id = $2"
WINDOW_TAIL = """
SELECT message_id, role, text, sender_name, occurred_at FROM (
    SELECT message_id, role, text, sender_name, occurred_at, position FROM session.entries
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


class Transcripts(Protocol):
    async def open_session(self, tenant: str, agent: str, key: str, chat_type: str, channel: str) -> SessionRow:
        """The session under `key`, locked for this unit of work; created with a new id when there is none."""
        ...

    async def has_external_id(self, tenant: str, channel: str, external_id: str | None) -> bool: ...

    async def append(self, tenant: str, session: SessionRow, entry: Entry) -> tuple[int, str]:
        """Append at the next position and advance the session's window; returns (position, message id)."""
        ...

    async def flag_compaction(self, tenant: str, session: SessionRow) -> None: ...

    async def window_tail(self, tenant: str, session: SessionRow, limit: int) -> tuple[TranscriptLine, ...]: ...


class PostgresTranscripts:
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def open_session(self, tenant: str, agent: str, key: str, chat_type: str, channel: str) -> SessionRow:
        created = await self._conn.fetchval(CREATE_SESSION, tenant, agent, key, uuid.uuid4(), chat_type, channel)
        row = await self._conn.fetchrow(LOCK_SESSION, tenant, agent, key)
        return SessionRow(
            str(row["session_id"]), row["last_position"], row["reset_index"], row["window_tokens"],
            row["window_bytes"], row["compaction_flagged"], row["compaction_cycle"], created is not None,
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
            await self._conn.execute(ADVANCE_MESSAGE, tenant, session_id, position, entry.token_estimate, size)
        return position, str(message_id)

    async def flag_compaction(self, tenant: str, session: SessionRow) -> None:
        await self._conn.execute(FLAG_COMPACTION, tenant, uuid.UUID(session.session_id))

    async def window_tail(self, tenant: str, session: SessionRow, limit: int) -> tuple[TranscriptLine, ...]:
        rows = await self._conn.fetch(WINDOW_TAIL, tenant, uuid.UUID(session.session_id), session.reset_index, limit)
        return tuple(
            TranscriptLine(message_id=str(r["message_id"]), role=r["role"], text=r["text"],
                           sender_name=r["sender_name"], occurred_at=r["occurred_at"])
            for r in rows
        )  # fmt: skip
