"""Read-side SQL over the projections, each run inside a tenant transaction (row-level security)."""

import asyncio
import time
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from cairn.platform.postgres import tenant_transaction
from cairn.text import SearchQuery

# Ranking: BM25 over the query's lexemes (k1 0.9, b 0.4: Anserini's defaults, suited to short chat
# messages), messages with every term first, then the more recent, then by id, so the order is stable
# and pages never overlap. Candidates are the messages matching any term, in scope (visibility is part
# of the WHERE clause, so hidden sessions never take a place under LIMIT), the most recent $9 of them,
# plus the most recent $9 matching every term (so an older message with every term is never crowded out
# by recent partial matches; skipped by a one-time filter when both queries are the same):
# every match in a tenant of ordinary size, bounded work in the largest (a frequent term walks
# messages_tenant_recent back in time, a rare one reads its few matches from messages_tenant_terms;
# migration 0017 says why matching runs in a function). Document frequencies are counted over the
# candidates (exact when they are all of the matches), the tenant's size up to 10,000 rows; a
# message's length is its number of distinct lexemes. Term frequencies come from the asked lexemes
# alone, marked by setweight and kept by ts_filter (both in C): unnesting whole vectors costs five
# times more. Every step scans or aggregates the step before, with no join between row sets, so even a
# plan with poor estimates stays linear in the candidates.
# $2 any-term tsquery; $3 all-terms tsquery; $4 limit; $5 agent (NULL: every agent of the tenant);
# $6 session keys (NULL: all); $7/$8 ranked lexemes and their weights; $9 candidate cap; $10 offset.
SEARCH_MESSAGES = """
WITH candidates AS MATERIALIZED (
    SELECT DISTINCT ON (message_id) message_id, occurred_at, terms, terms @@ CAST($3 AS tsquery) AS every
    FROM (
        SELECT * FROM indexer.matching_messages($1, CAST($2 AS tsquery), $5, $6, $9)
        UNION ALL
        SELECT * FROM indexer.matching_messages($1, CAST($3 AS tsquery), $5, $6, $9)
        WHERE CAST($2 AS tsquery) <> CAST($3 AS tsquery)
    ) matches
    ORDER BY message_id
),
found AS MATERIALIZED (
    SELECT c.message_id, c.occurred_at, c.every, length(c.terms)::float8 AS length,
           cardinality(term.positions)::float8 AS tf, ($8::float8[])[array_position($7::text[], term.lexeme)] AS weight,
           count(*) OVER (PARTITION BY term.lexeme)::float8 AS df
    FROM candidates c, unnest(ts_filter(setweight(c.terms, 'A', $7::text[]), '{a}')) AS term
),
corpus AS MATERIALIZED (
    SELECT greatest((SELECT count(*) FROM (SELECT 1 FROM indexer.messages WHERE tenant_id = $1 LIMIT 10000) t),
                    (SELECT count(*) FROM candidates))::float8 AS n,
           (SELECT greatest(avg(length(terms)), 1) FROM candidates)::float8 AS length
),
scored AS (
    SELECT message_id, occurred_at, every,
           sum(weight * ln(1 + (corpus.n - df + 0.5) / (df + 0.5))
               * tf * 1.9 / (tf + 0.9 * (0.6 + 0.4 * found.length / corpus.length))) AS bm25
    FROM found, corpus
    GROUP BY message_id, occurred_at, every
),
ranked AS (
    SELECT message_id, occurred_at, CASE WHEN every THEN 1.0 ELSE 0.0 END + bm25 / (bm25 + 1) AS score
    FROM scored
    ORDER BY score DESC, occurred_at DESC, message_id
    LIMIT $4 OFFSET $10
)
SELECT m.session_key, m.session_id::text, m.message_id::text, m.role, m.occurred_at, m.text, m.external_id, r.score
FROM ranked r JOIN indexer.messages m ON m.tenant_id = $1 AND m.message_id = r.message_id
ORDER BY r.score DESC, r.occurred_at DESC, r.message_id
"""
CUSTOM_PLANS = "SET LOCAL plan_cache_mode = force_custom_plan"
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
    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]") -> None:
        self._pool = pool

    async def search_messages(self, tenant: str, scope: "Scope", query: SearchQuery, page: "Page") -> list[MessageHit]:
        async with tenant_transaction(self._pool, tenant) as conn:
            # the best plan depends on how common the terms are: never reuse a generic one
            await conn.execute(CUSTOM_PLANS)
            rows = await conn.fetch(
                SEARCH_MESSAGES, tenant, query.any_terms, query.all_terms, page.limit, scope.agent_id,
                scope.session_keys, list(query.lexemes), list(query.weights), page.candidates, page.offset,
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
        deadline = time.monotonic() + bound_s
        while True:
            async with tenant_transaction(self._pool, tenant) as conn:
                reached = await conn.fetchval(INDEXED_UP_TO, tenant, agent)
            if reached is not None and reached >= position:
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)
