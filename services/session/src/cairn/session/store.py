"""Sessions and transcript entries in Postgres. Every call runs inside the caller's tenant
transaction; the session row is locked while a position is allocated, so one writer at a time."""

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cairn.events.models import TranscriptLine

Connection = Any

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
FIND_EXTERNAL = "SELECT position FROM session.entries WHERE tenant_id = $1 AND channel = $2 AND external_id = $3"
INSERT_ENTRY = """
INSERT INTO session.entries (tenant_id, session_id, position, kind, message_id, channel, external_id, role, text,
    sender_name, peer_id, reset_index, token_estimate, occurred_at, recorded_at, ingest_seq)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
"""
ADVANCE_MESSAGE = """
UPDATE session.sessions SET last_position = $4, window_tokens = window_tokens + $5, window_bytes = window_bytes + $6,
    message_count = message_count + 1, updated_at = now()
WHERE tenant_id = $1 AND agent_id = $2 AND session_key = $3
"""
FLAG_COMPACTION = """
UPDATE session.sessions SET compaction_flagged = true WHERE tenant_id = $1 AND agent_id = $2 AND session_key = $3
"""
ADVANCE_RESET = """
UPDATE session.sessions SET last_position = $4, reset_index = reset_index + 1, window_tokens = 0, window_bytes = 0,
    compaction_flagged = false, updated_at = now()
WHERE tenant_id = $1 AND agent_id = $2 AND session_key = $3
"""
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
    """A transcript entry to append; `kind` is 'message' or 'reset'."""

    kind: str
    channel: str
    external_id: str | None
    role: str | None
    text: str | None
    sender_name: str | None
    peer_id: str | None
    token_estimate: int
    occurred_at: datetime
    recorded_at: datetime
    ingest_seq: int | None


async def lock_or_create(
    conn: Connection, tenant: str, agent: str, key: str, chat_type: str, channel: str
) -> SessionRow:
    """The session under `key`, locked for this transaction; created with a new id when there is none."""
    created = await conn.fetchval(CREATE_SESSION, tenant, agent, key, uuid.uuid4(), chat_type, channel)
    row = await conn.fetchrow(LOCK_SESSION, tenant, agent, key)
    return SessionRow(
        str(row["session_id"]),
        row["last_position"],
        row["reset_index"],
        row["window_tokens"],
        row["window_bytes"],
        row["compaction_flagged"],
        row["compaction_cycle"],
        created is not None,
    )


async def already_stored(conn: Connection, tenant: str, channel: str, external_id: str | None) -> bool:
    if external_id is None:
        return False
    return await conn.fetchval(FIND_EXTERNAL, tenant, channel, external_id) is not None


async def append(conn: Connection, tenant: str, session: SessionRow, entry: Entry, reset_index: int) -> tuple[int, str]:
    """Insert the entry at the next position; returns (position, entry message id)."""
    position = session.last_position + 1
    message_id = uuid.uuid4()
    await conn.execute(
        INSERT_ENTRY,
        tenant,
        uuid.UUID(session.session_id),
        position,
        entry.kind,
        message_id,
        entry.channel,
        entry.external_id,
        entry.role,
        entry.text,
        entry.sender_name,
        entry.peer_id,
        reset_index,
        entry.token_estimate,
        entry.occurred_at,
        entry.recorded_at,
        entry.ingest_seq,
    )
    return position, str(message_id)


async def advance_after_message(
    conn: Connection, tenant: str, agent: str, key: str, position: int, tokens: int, size: int
) -> None:
    await conn.execute(ADVANCE_MESSAGE, tenant, agent, key, position, tokens, size)


async def flag_compaction(conn: Connection, tenant: str, agent: str, key: str) -> None:
    await conn.execute(FLAG_COMPACTION, tenant, agent, key)


async def advance_after_reset(conn: Connection, tenant: str, agent: str, key: str, position: int) -> None:
    await conn.execute(ADVANCE_RESET, tenant, agent, key, position)


async def window_tail(conn: Connection, tenant: str, session: SessionRow, limit: int) -> tuple[TranscriptLine, ...]:
    rows = await conn.fetch(WINDOW_TAIL, tenant, uuid.UUID(session.session_id), session.reset_index, limit)
    return tuple(
        TranscriptLine(
            message_id=str(r["message_id"]),
            role=r["role"],
            text=r["text"],
            sender_name=r["sender_name"],
            occurred_at=r["occurred_at"],
        )
        for r in rows
    )
