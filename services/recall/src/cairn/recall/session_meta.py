"""A session's metadata (`GET /v1/sessions/{session_key}`): the session service's row and the state of its
pre-compaction memory flushes, read from consolidation's `flushes_due` through cairn_app's grant, in one tenant
transaction."""

from datetime import datetime
from typing import Any

import asyncpg
from pydantic import BaseModel, Field

from cairn.storage.postgres import tenant_transaction

SESSION_META = """
SELECT session_id::text, chat_type, channel, status, reset_index, message_count, window_tokens,
       compaction_cycle AS compaction_count, parent_session_id::text, created_at, updated_at
FROM session.sessions
WHERE tenant_id = $1 AND agent_id = $2 AND session_key = $3
"""
# The latest flush done and the oldest still due, of the session's current id (all its windows).
FLUSH_STATE = """
SELECT d.cycle, d.reset_index, d.done_at, d.attempts, d.failures, d.last_error, d.refused, d.daily_path,
       p.cycle AS pending_cycle, p.reset_index AS pending_reset_index, p.attempts AS pending_attempts,
       p.failures AS pending_failures, p.last_error AS pending_error, p.next_attempt_at
FROM (SELECT 1) one
LEFT JOIN LATERAL (
    SELECT * FROM consolidation.flushes_due
    WHERE tenant_id = $1 AND session_id = $2 AND done_at IS NOT NULL
    ORDER BY reset_index DESC, cycle DESC LIMIT 1
) d ON true
LEFT JOIN LATERAL (
    SELECT * FROM consolidation.flushes_due
    WHERE tenant_id = $1 AND session_id = $2 AND done_at IS NULL
    ORDER BY reset_index, cycle LIMIT 1
) p ON true
"""

# An agent's flushes due and not done (memory status): with no model for the tenant, they wait here.
PENDING_FLUSHES = """
SELECT count(*) FROM consolidation.flushes_due WHERE tenant_id = $1 AND agent_id = $2 AND done_at IS NULL
"""


class MemoryFlush(BaseModel):
    """The pre-compaction flush: the last one done and, when one is due, why it is still waiting."""

    cycle: int | None = Field(description="compaction cycle of the last flush done (null: none yet)")
    last_at: datetime | None = Field(description="when the last flush was done")
    failures: int = Field(description="failed attempts of the flush still due, else of the last one done")
    attempts: int = Field(description="model turns of the flush still due, else of the last one done")
    pending: bool = Field(description="a flush is due and not done yet (the model is down, or none is configured)")
    pending_cycle: int | None = Field(description="compaction cycle of the oldest flush still due")
    next_attempt_at: datetime | None = Field(description="when the flush still due is tried again")
    last_error: str | None = Field(
        description="why the flush still due is waiting, else the writes the last flush refused"
    )
    refused: int = Field(description="writes outside the day's note the last flush's model asked for, all refused")
    daily_path: str | None = Field(description="the daily note the last flush appended to (null: nothing to keep)")


class SessionMeta(BaseModel):
    session_key: str
    session_id: str
    chat_type: str
    channel: str
    status: str
    reset_index: int
    message_count: int
    window_tokens: int = Field(description="the live window's token estimate")
    compaction_count: int
    parent_session_id: str | None
    created_at: datetime
    updated_at: datetime
    memory_flush: MemoryFlush


def memory_flush(row: Any) -> MemoryFlush:
    pending = row["pending_cycle"] is not None
    return MemoryFlush(
        cycle=row["cycle"],
        last_at=row["done_at"],
        failures=(row["pending_failures"] if pending else row["failures"]) or 0,
        attempts=(row["pending_attempts"] if pending else row["attempts"]) or 0,
        pending=pending,
        pending_cycle=row["pending_cycle"],
        next_attempt_at=row["next_attempt_at"],
        last_error=row["pending_error"] if pending else row["last_error"],
        refused=row["refused"] or 0,
        daily_path=row["daily_path"],
    )


async def session_meta(pool: "asyncpg.Pool[asyncpg.Record]", tenant: str, agent: str, key: str) -> SessionMeta | None:
    async with tenant_transaction(pool, tenant) as conn:
        session = await conn.fetchrow(SESSION_META, tenant, agent, key)
        if session is None:
            return None
        flush = await conn.fetchrow(FLUSH_STATE, tenant, session["session_id"])
    return SessionMeta(session_key=key, **dict(session), memory_flush=memory_flush(flush))


async def pending_flushes(pool: "asyncpg.Pool[asyncpg.Record]", tenant: str, agent: str) -> int:
    async with tenant_transaction(pool, tenant) as conn:
        count: int = await conn.fetchval(PENDING_FLUSHES, tenant, agent)
    return count
