"""Read-side SQL over the projections, each run inside a tenant transaction (row-level security)."""

import asyncio
import time
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from cairn.platform.postgres import tenant_transaction

# Visibility is part of the WHERE clause, so hidden sessions never take a place under LIMIT. $5: the
# agent to search (NULL: every agent of the tenant); $6: the session keys to search (NULL: all of them).
SEARCH_MESSAGES = """
SELECT session_key, session_id::text, message_id::text, role, occurred_at, text,
       ts_rank_cd(terms, any_q) + CASE WHEN terms @@ all_q THEN 1.0 ELSE 0.0 END AS score
FROM indexer.messages, CAST($2 AS tsquery) AS any_q, CAST($3 AS tsquery) AS all_q
WHERE tenant_id = $1 AND terms @@ any_q
  AND ($5::text IS NULL OR agent_id = $5) AND ($6::text[] IS NULL OR session_key = ANY($6))
ORDER BY score DESC, occurred_at DESC, message_id
LIMIT $4
"""
# The caller's key and every session forked or spawned from it, at any depth, whatever ids the keys
# have had (a daily or idle reset moves a key to a new id; children point at the id they came from).
TREE_KEYS = """
WITH RECURSIVE tree(session_key) AS (
    SELECT $3::text
    UNION
    SELECT s.session_key FROM session.sessions s
    JOIN session.key_sessions k ON k.tenant_id = s.tenant_id AND k.session_id = s.parent_session_id
    JOIN tree t ON t.session_key = k.session_key
    WHERE s.tenant_id = $1 AND s.agent_id = $2 AND k.agent_id = $2
)
SELECT array_agg(session_key) FROM tree
"""
INDEXED_UP_TO = "SELECT ingest_seq FROM indexer.progress WHERE tenant_id = $1 AND agent_id = $2"


@dataclass(frozen=True)
class Scope:
    """Which sessions a search may see: one agent's (or every agent's when None), some keys (or all)."""

    agent_id: str | None
    session_keys: list[str] | None


@dataclass(frozen=True)
class MessageHit:
    session_key: str
    session_id: str
    message_id: str
    role: str
    occurred_at: datetime
    text: str
    score: float


class ReadStore:
    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]") -> None:
        self._pool = pool

    async def search_messages(
        self, tenant: str, scope: "Scope", any_q: str, all_q: str, limit: int
    ) -> list[MessageHit]:
        async with tenant_transaction(self._pool, tenant) as conn:
            rows = await conn.fetch(SEARCH_MESSAGES, tenant, any_q, all_q, limit, scope.agent_id, scope.session_keys)
        return [
            MessageHit(r["session_key"], r["session_id"], r["message_id"], r["role"], r["occurred_at"], r["text"],
                       float(r["score"]))
            for r in rows
        ]  # fmt: skip

    async def tree_keys(self, tenant: str, agent: str, caller_key: str) -> list[str]:
        async with tenant_transaction(self._pool, tenant) as conn:
            keys: list[str] = await conn.fetchval(TREE_KEYS, tenant, agent, caller_key)
        return keys

    async def wait_for_index(self, tenant: str, agent: str, position: int, bound_s: float) -> bool:
        """Wait (bounded) until the agent's index covers ingest position `position`; False at the bound.

        Per agent: each (tenant, agent) is applied in order, but agents progress independently."""
        deadline = time.monotonic() + bound_s
        while True:
            async with tenant_transaction(self._pool, tenant) as conn:
                reached = await conn.fetchval(INDEXED_UP_TO, tenant, agent)
            if reached is not None and reached >= position:
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)
