"""Read-only SQL over the session service's tables (`session.sessions`, `session.entries`), each
statement run inside a tenant transaction so row-level security admits only the caller's rows."""

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import asyncpg

from cairn.recall.history import Cursor, StoredMessage
from cairn.storage.postgres import tenant_transaction

FIND_SESSION = """
SELECT session_id::text, reset_index FROM session.sessions
WHERE tenant_id = $1 AND agent_id = $2 AND session_key = $3
"""
# An id the key pointed to before a daily or idle reset. It was closed by a boundary, so its window to
# show is the last one holding messages, not the empty one the boundary opened.
FIND_EARLIER_SESSION = """
SELECT k.session_id::text, coalesce(max(e.reset_index), 0) AS reset_index
FROM session.key_sessions k
LEFT JOIN session.entries e ON e.tenant_id = k.tenant_id AND e.session_id = k.session_id AND e.kind = 'message'
WHERE k.tenant_id = $1 AND k.agent_id = $2 AND k.session_key = $3 AND k.session_id = $4
GROUP BY k.session_id
"""
# The window of the entry a caller names by cairn's id ($3, NULL when it is not a UUID) or by the
# adapter's id ($4); both branches use an index, and only this session's entries count.
ANCHOR_WINDOW = """
SELECT reset_index, position FROM session.entries
WHERE tenant_id = $1 AND message_id = $3 AND session_id = $2
UNION ALL
SELECT reset_index, position FROM session.entries
WHERE tenant_id = $1 AND external_id = $4 AND session_id = $2
ORDER BY position LIMIT 1
"""
# reset_index never decreases with position, so the first message of the session answers quickly.
HAS_EARLIER_WINDOWS = """
SELECT EXISTS (
    SELECT 1 FROM session.entries
    WHERE tenant_id = $1 AND session_id = $2 AND reset_index < $3 AND kind = 'message' AND role = ANY($4::text[])
)
"""
# Newest first from `offset`, one row more than asked so the caller knows whether older rows remain.
WINDOW_MESSAGES = """
SELECT message_id::text, role, sender_name, text, occurred_at, recorded_at, position, external_id
FROM session.entries
WHERE tenant_id = $1 AND session_id = $2 AND reset_index = $3 AND kind = 'message' AND role = ANY($4::text[])
ORDER BY position DESC
LIMIT $5 OFFSET $6
"""
# Newest updated first; the cursor is the (updated_at, session_key) of the previous page's last row.
LIST_SESSIONS = """
SELECT session_key, session_id::text, chat_type, channel, status, message_count, window_tokens,
       compaction_cycle AS compaction_count, parent_session_id::text, created_at, updated_at
FROM session.sessions
WHERE tenant_id = $1 AND agent_id = $2
  AND ($3::text IS NULL OR chat_type = $3)
  AND ($4::text IS NULL OR status = $4)
  AND ($5::timestamptz IS NULL OR updated_at >= $5)
  AND ($6::timestamptz IS NULL OR (updated_at, session_key) < ($6, $7::text))
  AND strpos(session_key, 'incognito-') = 0
ORDER BY updated_at DESC, session_key DESC
LIMIT $8
"""


@dataclass(frozen=True)
class SessionHead:
    session_id: str
    reset_index: int  # the latest window


@dataclass(frozen=True)
class SessionFilter:
    agent_id: str
    chat_type: str | None
    status: str | None
    updated_since: datetime | None
    after: Cursor | None


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


class Reads(Protocol):
    """What a history page needs to know of a session: `HistoryReads` (Postgres) or `IncognitoReads`."""

    async def session(self, agent: str, key: str) -> SessionHead | None: ...

    async def earlier_session(self, agent: str, key: str, session_id: uuid.UUID) -> SessionHead | None: ...

    async def anchor_window(self, session_id: str, message_id: str) -> int | None: ...

    async def has_earlier_windows(self, session_id: str, window: int, roles: Sequence[str]) -> bool: ...

    async def newest_messages(
        self, session_id: str, window: int, roles: Sequence[str], limit: int, offset: int
    ) -> list[StoredMessage]: ...


class HistoryReads:
    """The reads of one history request, sharing one tenant transaction (one consistent view)."""

    def __init__(self, conn: Any, tenant: str) -> None:
        self._conn, self._tenant = conn, tenant

    async def session(self, agent: str, key: str) -> SessionHead | None:
        row = await self._conn.fetchrow(FIND_SESSION, self._tenant, agent, key)
        return SessionHead(row["session_id"], row["reset_index"]) if row else None

    async def earlier_session(self, agent: str, key: str, session_id: uuid.UUID) -> SessionHead | None:
        row = await self._conn.fetchrow(FIND_EARLIER_SESSION, self._tenant, agent, key, session_id)
        return SessionHead(row["session_id"], row["reset_index"]) if row else None

    async def anchor_window(self, session_id: str, message_id: str) -> int | None:
        """The window holding `message_id` (ours or the adapter's) in this session, None if it is not there."""
        row = await self._conn.fetchrow(
            ANCHOR_WINDOW, self._tenant, uuid.UUID(session_id), _as_uuid(message_id), message_id
        )
        return int(row["reset_index"]) if row else None

    async def has_earlier_windows(self, session_id: str, window: int, roles: Sequence[str]) -> bool:
        if window == 0:
            return False  # nothing precedes the first window; spares a scan of the whole session
        found = await self._conn.fetchval(HAS_EARLIER_WINDOWS, self._tenant, uuid.UUID(session_id), window, roles)
        return bool(found)

    async def newest_messages(
        self, session_id: str, window: int, roles: Sequence[str], limit: int, offset: int
    ) -> list[StoredMessage]:
        rows = await self._conn.fetch(
            WINDOW_MESSAGES, self._tenant, uuid.UUID(session_id), window, roles, limit, offset
        )
        return [
            StoredMessage(
                r["message_id"], r["role"], r["sender_name"], r["text"] or "", r["occurred_at"],
                r["recorded_at"], r["position"], r["external_id"],
            )
            for r in rows
        ]  # fmt: skip


class HistoryStore:
    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]") -> None:
        self._pool = pool

    @asynccontextmanager
    async def reader(self, tenant: str) -> AsyncIterator[HistoryReads]:
        async with tenant_transaction(self._pool, tenant) as conn:
            yield HistoryReads(conn, tenant)

    async def sessions(self, tenant: str, where: SessionFilter, limit: int) -> list[dict[str, Any]]:
        after_at = where.after.updated_at if where.after else None
        after_key = where.after.session_key if where.after else None
        async with tenant_transaction(self._pool, tenant) as conn:
            rows = await conn.fetch(
                LIST_SESSIONS, tenant, where.agent_id, where.chat_type, where.status, where.updated_since,
                after_at, after_key, limit,
            )  # fmt: skip
        return [dict(r) for r in rows]
