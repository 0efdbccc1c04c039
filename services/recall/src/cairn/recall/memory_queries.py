"""Read-side SQL of the memory index: lexical and vector candidates, chunk details, status.

The vector side must not starve a small agent that shares the HNSW index with a large one: a filtered
HNSW scan returns the `ef_search` nearest rows of the whole index and only then filters them. So an
agent with few chunks is searched exactly (its rows by the btree index of memory_chunk_vectors, narrow rows
that hold the vector in line, cosine for each: exact, and ~1 ms per 1,000 chunks), and a large one through
HNSW with pgvector 0.8's iterative scan, allowed to visit enough tuples for its share of the index to fill
the candidate list. The cut-over stays at 10,000 chunks: HNSW is faster from ~5,000 (2-4 ms) but its
recall@24 against the exact scan is 0.91-0.97 below 5,000 chunks in a shared index (README, memory search).
"""

import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from functools import partial
from typing import Any

import asyncpg
import numpy as np

from cairn.recall.progress import IndexProgress, wait_until
from cairn.storage.postgres import MEMORY_PROGRESS_CHANNEL, tenant_transaction

SUPPORTED_DIMS = (384, 512, 768, 1024, 1536)  # each has a partial HNSW index (libs/memindex's schema baseline)
EXACT_UP_TO = 10_000  # chunks of an agent searched exactly; more go through HNSW
LEXICAL_CANDIDATES = 300  # most recent matches ranked per tsquery (every term, then any term)

# $5: the paths a search may see (`Where.paths`, as `matching_memory_chunks` reads them), NULL for every path.
_FILTER = """tenant_id = $1 AND agent_id = $2 AND source = ANY($3::text[])
  AND ($4::text IS NULL OR session_key IS DISTINCT FROM $4)
  AND ($5::text[] IS NULL OR EXISTS (SELECT 1 FROM unnest($5::text[]) p
                                     WHERE path = p OR (right(p, 1) = '/' AND starts_with(path, p))))"""

# Lexical candidates: the most recent $8 chunks matching every term and, only when they are fewer than the
# $9 asked for, the most recent $8 matching any term that are not among them. A chunk with every term scores
# ts_rank_cd plus 1, any other ts_rank_cd (plus 1 if it has every term after all: only when $8 < $9), so a chunk
# with every term outranks any partial match, and every full match among the most recent $8 partial ones is among
# the most recent $8 full ones (an older chunk with every term is never crowded out by recent partial matches).
# Matching runs in a function (libs/memindex's schema baseline says why, at memory_chunks), so a rare term reads its
# few matches from the (tenant_id, terms) index and a frequent one walks the agent's chunks back in time: the work is
# bounded by the cap, not by the agent's size.
#
# Of each function's matches only the best $9 by ts_rank are scored by ts_rank_cd (its Cover() walks every
# position of the asked words: ~16 us a chunk of 20 LoCoMo turns, against ~1.7 us for ts_rank, which reads
# them once), and only (chunk_id, score) pairs are kept and sorted, not the chunks' terms (5-7 kB each). So
# which matches become candidates is decided by how many of the asked words a chunk holds, each counted with a
# saturating frequency (ts_rank), not by their total count (ts_rank_cd: a name in every line's speaker label
# outweighs the other words); a candidate's score is ts_rank_cd as before. A query with at most $9 matches gets
# the same candidates and scores. Measured on the realistic 100k seed (memsearch18), the
# statement's backend CPU, median per-question ratio 0.77 (p50 14.0 -> 10.4 ms); `cairn bench retrieval --mode
# memory` on LoCoMo writes byte-identical results; at 100k, where the final hits do change, those holding a
# gold line of the question: Hit@8 0.597 -> 0.597, MRR 0.235 -> 0.243.
LEXICAL = """
WITH every AS MATERIALIZED (
    SELECT chunk_id, ts_rank_cd(terms, CAST($6 AS tsquery), 32) + 1.0 AS score
    FROM (SELECT chunk_id, terms
          FROM indexer.matching_memory_chunks($1, $2, $3::text[], $4, CAST($7 AS tsquery), $8, $5::text[])
          ORDER BY ts_rank(terms, CAST($6 AS tsquery)) DESC, chunk_id LIMIT $9) best
)
SELECT chunk_id, score FROM every
UNION ALL
SELECT chunk_id,
       ts_rank_cd(terms, CAST($6 AS tsquery), 32) + CASE WHEN terms @@ CAST($7 AS tsquery) THEN 1.0 ELSE 0.0 END
FROM (SELECT chunk_id, terms
      FROM indexer.matching_memory_chunks($1, $2, $3::text[], $4, CAST($6 AS tsquery), $8, $5::text[])
      WHERE CAST($6 AS tsquery) <> CAST($7 AS tsquery) AND (SELECT count(*) FROM every) < $9
        AND chunk_id NOT IN (SELECT chunk_id FROM every)
      ORDER BY ts_rank(terms, CAST($6 AS tsquery)) DESC, chunk_id LIMIT $9) best
ORDER BY score DESC, chunk_id
LIMIT $9
"""
# The exact scan of one agent's rows reads memory_chunk_vectors, narrow rows holding the vector in line, not
# memory_chunks, whose wide rows keep it out of line (libs/memindex V0002 says why): ~8 buffers a chunk read
# there against ~0.4 here, same vectors, so the same ids and scores. `+ 0` keeps the order computed, not indexed.
EXACT_VECTOR = f"""
SELECT chunk_id, 1 - (embedding <=> $6::real[]::vector) AS score
FROM indexer.memory_chunk_vectors
WHERE {_FILTER} AND model = $7
ORDER BY (embedding <=> $6::real[]::vector) + 0
LIMIT $8
"""
_ANN = """
WITH nearest AS MATERIALIZED (
    SELECT chunk_id, embedding::vector({d}) <=> $6::real[]::vector({d}) AS distance
    FROM indexer.memory_chunks
    WHERE dims = {d} AND {filter} AND model = $7
    ORDER BY embedding::vector({d}) <=> $6::real[]::vector({d})
    LIMIT $8
)
SELECT chunk_id, 1 - distance AS score FROM nearest ORDER BY distance + 0
"""
ANN_VECTOR = {d: _ANN.format(d=d, filter=_FILTER) for d in SUPPORTED_DIMS}
# Relaxed order visits the graph once (re-sorted above: `+ 0`, or the planner would trust the CTE's own
# order); the bound is sized per query, see `ann_settings`. Sorting is discouraged so that the planner
# walks the HNSW index rather than sorting the agent's rows.
SET_ANN = """
SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', $1, true),
       set_config('hnsw.max_scan_tuples', $2, true), set_config('enable_sort', 'off', true)
"""
# Chunks dated on one of the days a query names (transcripts by their first turn, notes by their day), read
# from the (tenant, agent, day) index in a function as the owner (indexer.memory_chunks_on_days), not by reading all
# the chunks of the agent.
ON_DAYS = """
SELECT chunk_id, 0.0 AS score FROM indexer.memory_chunks_on_days($1, $2, $3::text[], $4, $5::text[], $6)
"""
# What the vector side's plan depends on, in one round trip: the agent's chunks (kept by the indexer) and the
# index's estimated rows.
PLAN_INPUTS = """
SELECT coalesce((SELECT chunks FROM indexer.memory_counts WHERE tenant_id = $1 AND agent_id = $2), 0) AS chunks,
       (SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'indexer.memory_chunks'::regclass) AS rows
"""
# A candidate's vector comes in pgvector's binary form (read straight into numpy, not as a list of
# floats); `present` are the asked lexemes ($4) the chunk contains, and a lexical match ($5) or a chunk
# without a vector of the model also brings all its lexemes (what the ranking compares chunks by).
DETAILS = """
SELECT chunk_id, source, path, session_key, session_id::text, start_line, end_line, text,
       message_ids::text[] AS message_ids, external_ids, dated, occurred_at,
       CASE WHEN model = $3 THEN vector_send(embedding) END AS embedding,
       tsvector_to_array(ts_filter(setweight(terms, 'A', $4::text[]), '{a}')) AS present,
       CASE WHEN model IS DISTINCT FROM $3 OR chunk_id = ANY($5::uuid[]) THEN tsvector_to_array(terms) END AS lexemes
FROM indexer.memory_chunks WHERE tenant_id = $1 AND chunk_id = ANY($2::uuid[])
"""
# The same columns for rows a candidate statement found (`c`), so that each side brings its candidates' details
# in its own statement, while the other side is still running: `{model}` and `{asked}` are its parameters, and
# a lexical match always brings its lexemes (what DETAILS gives a chunk in `matched`). A vector candidate has a
# vector of the model, so it brings none, unless the lexical side found it too (that row is used).
_ROW_COLUMNS = """c.chunk_id, c.source, c.path, c.session_key, c.session_id::text, c.start_line, c.end_line, c.text,
       c.message_ids::text[] AS message_ids, c.external_ids, c.dated, c.occurred_at,
       CASE WHEN c.model = {model} THEN vector_send(c.embedding) END AS embedding,
       tsvector_to_array(ts_filter(setweight(c.terms, 'A', {asked}::text[]), '{{a}}')) AS present"""


def _with_rows(candidates: str, model: str, asked: str, lexemes: str) -> str:
    """A candidate statement (chunk_id, score) followed by its rows' details, by primary key."""
    columns = _ROW_COLUMNS.format(model=model, asked=asked)
    return f"""
WITH found AS MATERIALIZED ({candidates})
SELECT f.score, {columns}, {lexemes} AS lexemes
FROM found f JOIN indexer.memory_chunks c ON c.tenant_id = $1 AND c.chunk_id = f.chunk_id
"""


LEXICAL_ROWS = _with_rows(LEXICAL, "$10", "$11", "tsvector_to_array(c.terms)")
EXACT_VECTOR_ROWS = _with_rows(EXACT_VECTOR, "$7", "$9", "NULL::text[]")
ANN_VECTOR_ROWS = {d: _with_rows(sql, "$7", "$9", "NULL::text[]") for d, sql in ANN_VECTOR.items()}
# A write position is searchable once the memory consumers passed it and no debounced session holds it back.
REACHED = """
SELECT coalesce((SELECT ingest_seq FROM indexer.memory_progress WHERE tenant_id = $1 AND agent_id = $2), 0) >= $3
   AND NOT EXISTS (SELECT 1 FROM indexer.memory_pending
                   WHERE tenant_id = $1 AND agent_id = $2 AND first_seq <= $3)
"""
# The query's cosine with each turn, computed where the vectors are (inner product: vectors are unit length).
TURN_COSINES = """
SELECT message_id::text, -(embedding <#> $4::real[]::vector) AS cosine FROM indexer.memory_turns
WHERE tenant_id = $1 AND message_id = ANY($2::uuid[]) AND model = $3 AND vector_dims(embedding) = $5
"""
STATUS_CHUNKS = """
SELECT count(*) FILTER (WHERE source = 'memory') AS memory_chunks,
       count(*) FILTER (WHERE source = 'sessions') AS session_chunks,
       count(DISTINCT path) AS documents,
       count(*) FILTER (WHERE model IS DISTINCT FROM $3) AS without_vector,
       max(indexed_at) AS last_indexed_at
FROM indexer.memory_chunks WHERE tenant_id = $1 AND agent_id = $2
"""
# Remembered messages whose own vector is of another model (or made before 0141): ranked without their own meaning
# until the memory worker re-embeds them. A message without any vector is not chunked yet (pending sessions). `<`
# or `>` (not IS DISTINCT FROM) so the (tenant_id, model) index finds only those: none, once re-embedded.
STATUS_TURNS = """
SELECT count(*) AS without_vector FROM indexer.memory_turns
WHERE tenant_id = $1 AND agent_id = $2 AND (model < $3 OR model > $3)
"""
STATUS_PENDING = """
SELECT count(*) AS sessions, min(first_at) AS oldest FROM indexer.memory_pending WHERE tenant_id = $1 AND agent_id = $2
"""
# Documents whose current version has no chunks yet (empty documents have none to wait for).
STATUS_DOCUMENTS = """
SELECT count(*) AS documents, min(d.updated_at) AS oldest FROM consolidation.documents d
WHERE d.tenant_id = $1 AND d.agent_id = $2 AND NOT d.deleted AND d.text ~ '\\S'
  AND NOT EXISTS (SELECT 1 FROM indexer.memory_chunks c WHERE c.tenant_id = d.tenant_id AND c.agent_id = d.agent_id
                  AND c.path = d.path AND c.version >= d.version)
"""


@dataclass(frozen=True)
class Where:
    """What a search may see: one agent's chunks of these sources (and paths), minus the caller's own session."""

    tenant: str
    agent: str
    sources: tuple[str, ...]
    exclude_session_key: str | None
    paths: tuple[str, ...] | None = None  # only these paths ("…/": every path under it); None: every path


@dataclass(frozen=True)
class ChunkDetail:
    chunk_id: str
    source: str
    path: str | None
    session_key: str | None
    session_id: str | None
    start_line: int
    end_line: int
    text: str
    message_ids: list[str]
    external_ids: list[str | None]
    dated: date | None
    occurred_at: datetime | None
    embedding: np.ndarray | None
    present: frozenset[str]  # the asked lexemes the chunk contains
    lexemes: frozenset[str] | None  # all of them, for a lexical match or a chunk without a vector of the model


def ann_settings(limit: int, agent_chunks: int, index_rows: int) -> tuple[str, str]:
    """ef_search and the iterative scan's tuple bound: enough visits that the agent's share of the index
    yields `limit` rows on average, four times over (pgvector's default bound is 20,000)."""
    share = max(agent_chunks, 1) / max(index_rows, agent_chunks, 1)
    bound = min(max(int(4 * limit / share), 20_000), 2_000_000)
    return str(min(max(2 * limit, 40), 1000)), str(bound)


class MemoryReads:
    def __init__(
        self,
        pool: "asyncpg.Pool[asyncpg.Record]",
        lexical_candidates: int = LEXICAL_CANDIDATES,
        progress: IndexProgress | None = None,
        poll_s: float = 0.05,
    ) -> None:
        """`progress`: wakes read-your-writes waits at the memory index's commits; they poll every `poll_s` anyway."""
        self._pool = pool
        self._lexical_candidates = lexical_candidates
        self._progress, self._poll_s = progress, poll_s

    async def lexical(self, where: Where, any_q: str, all_q: str, limit: int) -> dict[str, float]:
        async with tenant_transaction(self._pool, where.tenant) as conn:
            rows = await conn.fetch(LEXICAL, *_params(where), any_q, all_q, self._lexical_candidates, limit)
        return {str(r["chunk_id"]): float(r["score"]) for r in rows}

    async def lexical_rows(
        self, where: Where, any_q: str, all_q: str, limit: int, model: str | None, asked: Sequence[str]
    ) -> tuple[dict[str, float], list["ChunkDetail"]]:
        """`lexical` and, in the same statement, the candidates' details (as `details` gives a lexical match)."""
        params = (*_params(where), any_q, all_q, self._lexical_candidates, limit, model, list(asked))
        async with tenant_transaction(self._pool, where.tenant) as conn:
            rows = await conn.fetch(LEXICAL_ROWS, *params)
        return {str(r["chunk_id"]): float(r["score"]) for r in rows}, [_detail(r) for r in rows]

    async def vector(
        self, where: Where, query: Sequence[float], model: str, limit: int, exact_up_to: int = EXACT_UP_TO
    ) -> dict[str, float]:
        return await self.vector_when_ready(where, _ready(query), model, limit, exact_up_to)

    async def vector_when_ready(
        self,
        where: Where,
        query: Awaitable[Sequence[float] | None],
        model: str,
        limit: int,
        exact_up_to: int = EXACT_UP_TO,
    ) -> dict[str, float]:
        """The vector candidates of a query vector that may still be computing: the transaction is opened and
        the plan chosen and configured meanwhile (the agent's size decides exact scan or HNSW), so only the
        search itself waits for the vector. None (no vector after all): no candidates."""
        scores, _ = await self._vector(where, query, model, limit, exact_up_to, None)
        return scores

    async def vector_rows_when_ready(
        self,
        where: Where,
        query: Awaitable[Sequence[float] | None],
        model: str,
        limit: int,
        asked: Sequence[str],
        exact_up_to: int = EXACT_UP_TO,
    ) -> tuple[dict[str, float], list["ChunkDetail"]]:
        """`vector_when_ready` and, in the same statement, the candidates' details (as `details` gives a chunk
        that is not a lexical match; `asked` are the query's lexemes)."""
        return await self._vector(where, query, model, limit, exact_up_to, asked)

    async def _vector(
        self,
        where: Where,
        query: Awaitable[Sequence[float] | None],
        model: str,
        limit: int,
        exact_up_to: int,
        asked: Sequence[str] | None,
    ) -> tuple[dict[str, float], list["ChunkDetail"]]:
        with_rows = () if asked is None else (list(asked),)
        async with tenant_transaction(self._pool, where.tenant) as conn:
            inputs = await conn.fetchrow(PLAN_INPUTS, uuid.UUID(where.tenant), where.agent)
            chunks, index_rows = (inputs["chunks"], inputs["rows"]) if inputs else (0, 0)
            if chunks > exact_up_to:
                await conn.execute(SET_ANN, *ann_settings(limit, chunks, index_rows))
            vector = await query
            if vector is None:
                return {}, []
            if chunks > exact_up_to and len(vector) in ANN_VECTOR:
                statement = (ANN_VECTOR if asked is None else ANN_VECTOR_ROWS)[len(vector)]
            else:  # a small agent, or a size without an HNSW index
                statement = EXACT_VECTOR if asked is None else EXACT_VECTOR_ROWS
            rows = await conn.fetch(statement, *_params(where), list(vector), model, limit, *with_rows)
        scores = {str(r["chunk_id"]): float(r["score"]) for r in rows}
        return scores, [] if asked is None else [_detail(r) for r in rows]

    async def details(
        self,
        tenant: str,
        chunk_ids: Sequence[str],
        model: str | None,
        asked: Sequence[str],
        matched: Sequence[str],
        query: Sequence[float] | None = None,
    ) -> tuple[list[ChunkDetail], dict[str, float]]:
        """The candidates' rows (`asked` are the query's lexemes, `matched` the chunks its words found) and,
        given the query's vector, its cosine with every turn of the transcript chunks among them: one
        transaction, as this is on every search's critical path."""
        ids, matched_ids = [uuid.UUID(c) for c in chunk_ids], [uuid.UUID(c) for c in matched]
        async with tenant_transaction(self._pool, tenant) as conn:
            rows = await conn.fetch(DETAILS, uuid.UUID(tenant), ids, model, list(asked), matched_ids)
            details = [_detail(r) for r in rows]
            turns = [m for d in details if d.source == "sessions" for m in d.message_ids]
            cosines = await _turn_cosines(conn, tenant, turns, model, query) if query and model and turns else {}
        return details, cosines

    async def turn_cosines(
        self, tenant: str, message_ids: Sequence[str], model: str, query: Sequence[float]
    ) -> dict[str, float]:
        """The query's cosine with each of these turns (what `details` adds given the query's vector)."""
        async with tenant_transaction(self._pool, tenant) as conn:
            return await _turn_cosines(conn, tenant, message_ids, model, query)

    async def on_days(self, where: Where, month_days: Sequence[str], limit: int) -> list[str]:
        async with tenant_transaction(self._pool, where.tenant) as conn:
            rows = await conn.fetch(ON_DAYS, *_params(where)[:4], list(month_days), limit)  # paths: `in_paths`
        return [str(r["chunk_id"]) for r in rows]

    async def wait_for(self, tenant: str, agent: str, position: int, bound_s: float) -> bool:
        """Wait (bounded) until the agent's memory index covers ingest position `position`; False at the bound."""

        async def reached() -> bool:
            async with tenant_transaction(self._pool, tenant) as conn:
                return bool(await conn.fetchval(REACHED, uuid.UUID(tenant), agent, position))

        woken = partial(self._progress.changed, MEMORY_PROGRESS_CHANNEL) if self._progress else None
        return await wait_until(reached, bound_s, self._poll_s, woken)

    async def status(self, tenant: str, agent: str, model: str | None) -> dict[str, Any]:
        tenant_id = uuid.UUID(tenant)
        async with tenant_transaction(self._pool, tenant) as conn:
            chunks = await conn.fetchrow(STATUS_CHUNKS, tenant_id, agent, model)
            turns = await conn.fetchrow(STATUS_TURNS, tenant_id, agent, model)
            pending = await conn.fetchrow(STATUS_PENDING, tenant_id, agent)
            documents = await conn.fetchrow(STATUS_DOCUMENTS, tenant_id, agent)
        return {
            "chunks": dict(chunks or {}),
            "turns": dict(turns or {}),
            "pending": dict(pending or {}),
            "documents": dict(documents or {}),
        }


def _detail(r: asyncpg.Record) -> ChunkDetail:
    return ChunkDetail(
        str(r["chunk_id"]), r["source"], r["path"], r["session_key"], r["session_id"], r["start_line"],
        r["end_line"], r["text"], list(r["message_ids"]), list(r["external_ids"]), r["dated"], r["occurred_at"],
        _vector(r["embedding"]), frozenset(r["present"]), None if r["lexemes"] is None else frozenset(r["lexemes"]),
    )  # fmt: skip


async def _turn_cosines(
    conn: Any, tenant: str, message_ids: Sequence[str], model: str, query: Sequence[float]
) -> dict[str, float]:
    ids = [uuid.UUID(m) for m in message_ids]
    rows = await conn.fetch(TURN_COSINES, uuid.UUID(tenant), ids, model, list(query), len(query))
    return {r["message_id"]: float(r["cosine"]) for r in rows}


def _vector(sent: bytes | None) -> np.ndarray | None:
    """A vector from pgvector's binary form: dimensions (int16), unused (int16), big-endian float4s."""
    if sent is None:
        return None
    return np.frombuffer(sent, dtype=">f4", offset=4).astype(np.float32)


async def _ready(vector: Sequence[float]) -> Sequence[float]:
    return vector


def _params(where: Where) -> tuple[Any, ...]:
    paths = None if where.paths is None else list(where.paths)
    return uuid.UUID(where.tenant), where.agent, list(where.sources), where.exclude_session_key, paths


def in_paths(path: str | None, paths: Sequence[str] | None) -> bool:
    """Whether a chunk of `path` is among `paths` as `_FILTER` reads them (None: every path is)."""
    if paths is None:
        return True
    return path is not None and any(path == p or (p.endswith("/") and path.startswith(p)) for p in paths)
