"""Read-side SQL over the projections, each run for one tenant under row-level security."""

import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from cairn.recall.progress import IndexProgress, wait_until
from cairn.storage.postgres import tenant_transaction
from cairn.text import SearchQuery

# The whole search is one function (the indexer's schema/R__search_messages.sql holds the ranking and says why), called
# as one statement: it sets the tenant for its own transaction, so a search is one round trip.
# $1 tenant; $2 any-term tsquery; $3 all-terms tsquery; $4 limit; $5 offset; $6 agent (NULL: every agent
# of the tenant); $7 session keys (NULL: all); $8/$9 ranked lexemes and their weights; $10 candidate cap.
SEARCH_MESSAGES = """
SELECT session_key, session_id, message_id, role, occurred_at, text, external_id, score
FROM indexer.search_messages($1, CAST($2 AS tsquery), CAST($3 AS tsquery), $4, $5, $6, $7, $8, $9, $10)
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
class Page:
    """Which ranked hits to return, and how many of the most recent matches to rank at most."""

    limit: int
    offset: int
    candidates: int


@dataclass(frozen=True)
class MessageHit:
    session_key: str
    session_id: str
    message_id: str
    role: str
    occurred_at: datetime
    text: str
    score: float
    external_id: str | None = None


class ReadStore:
    def __init__(
        self, pool: "asyncpg.Pool[asyncpg.Record]", progress: IndexProgress | None = None, poll_s: float = 0.05
    ) -> None:
        """`progress`: wakes read-your-writes waits at the indexer's commits; they poll every `poll_s` anyway."""
        self._pool, self._progress, self._poll_s = pool, progress, poll_s

    async def search_messages(self, tenant: str, scope: "Scope", query: SearchQuery, page: "Page") -> list[MessageHit]:
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                SEARCH_MESSAGES, uuid.UUID(tenant), query.any_terms, query.all_terms, page.limit, page.offset,
                scope.agent_id, scope.session_keys, list(query.lexemes), list(query.weights), page.candidates,
            )  # fmt: skip
        return [
            MessageHit(r["session_key"], r["session_id"], r["message_id"], r["role"], r["occurred_at"], r["text"],
                       float(r["score"]), r["external_id"])
            for r in rows
        ]  # fmt: skip

    async def tree_keys(self, tenant: str, agent: str, caller_key: str) -> list[str]:
        async with tenant_transaction(self._pool, tenant) as conn:
            keys: list[str] = await conn.fetchval(TREE_KEYS, tenant, agent, caller_key)
        return keys

    async def wait_for_index(self, tenant: str, agent: str, position: int, bound_s: float) -> bool:
        """Wait (bounded) until the agent's index covers ingest position `position`; False at the bound.

        Per agent: each (tenant, agent) is applied in order, but agents progress independently."""

        async def reached() -> bool:
            async with tenant_transaction(self._pool, tenant) as conn:
                position_reached = await conn.fetchval(INDEXED_UP_TO, tenant, agent)
            return position_reached is not None and position_reached >= position

        return await wait_until(reached, bound_s, self._poll_s, self._progress.changed if self._progress else None)
