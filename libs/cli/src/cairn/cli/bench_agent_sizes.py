"""`cairn bench memindex --part sizes`: memory search's vector side by agent size.

Agents of `--sizes` chunks (realistic text with `--data`, synthetic otherwise; clustered synthetic vectors) and a
background agent share one 512-d HNSW index, built once after the bulk load. For each size, the same query vectors
go through three statements, interleaved: the exact scan over the wide chunk rows (what ran before memindex V0002,
vectors out of line), the exact scan recall runs now (memory_chunk_vectors, vectors in line) and the HNSW iterative
scan recall runs above its cut-over; with their buffers (EXPLAIN) and the HNSW scan's recall@k against the exact
one. Then `POST /v1/memory/search` for each size, sizes interleaved, as a ratio to the smallest agent.

The statements are copies of recall's (cairn.cli does not depend on the service); tests/unit/test_bench_agent_sizes.py
keeps them equal.
"""

import asyncio
import json
import random
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import numpy as np

from cairn.cli.bench import new_tenant
from cairn.cli.bench_memindex import (
    BUILD_HNSW,
    DROP_HNSW,
    INDEX_PIECES,
    PIECES,
    SETTLE,
    Text,
    _tenant_of,
    conversation_text,
    synthetic_text,
)
from cairn.cli.endpoints import postgres_as
from cairn.text import index_terms, to_tsvector_text

SIZES = (20, 1_000, 2_500, 5_000, 10_000, 20_000)
BACKGROUND = 60_000  # another agent's chunks in the same index (vectors only)
POOL = 24  # the vector side's candidates at the default limit 6 (recall's memory_search)

# Copies of recall's memory_queries statements (kept equal by a unit test).
FILTER = """tenant_id = $1 AND agent_id = $2 AND source = ANY($3::text[])
  AND ($4::text IS NULL OR session_key IS DISTINCT FROM $4)
  AND ($5::text[] IS NULL OR EXISTS (SELECT 1 FROM unnest($5::text[]) p
                                     WHERE path = p OR (right(p, 1) = '/' AND starts_with(path, p))))"""
EXACT_VECTOR = f"""
SELECT chunk_id, 1 - (embedding <=> $6::real[]::vector) AS score
FROM indexer.memory_chunk_vectors
WHERE {FILTER} AND model = $7
ORDER BY (embedding <=> $6::real[]::vector) + 0
LIMIT $8
"""
ANN_VECTOR_512 = f"""
WITH nearest AS MATERIALIZED (
    SELECT chunk_id, embedding::vector(512) <=> $6::real[]::vector(512) AS distance
    FROM indexer.memory_chunks
    WHERE dims = 512 AND {FILTER} AND model = $7
    ORDER BY embedding::vector(512) <=> $6::real[]::vector(512)
    LIMIT $8
)
SELECT chunk_id, 1 - distance AS score FROM nearest ORDER BY distance + 0
"""
SET_ANN = """
SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', $1, true),
       set_config('hnsw.max_scan_tuples', $2, true), set_config('enable_sort', 'off', true)
"""
# The exact scan before memindex V0002: the same filter and cosine over the wide chunk rows.
WIDE_EXACT_VECTOR = EXACT_VECTOR.replace("indexer.memory_chunk_vectors", "indexer.memory_chunks")
STATEMENTS = {"exact, wide rows": WIDE_EXACT_VECTOR, "exact": EXACT_VECTOR, "hnsw": ANN_VECTOR_512}

# Each chunk: `$4` random pieces joined by `$5`, its vector a cluster centre (`$6` spreads agents over them) plus
# noise of its own (no two chunks of the index share a vector).
SEED = """
INSERT INTO indexer.memory_chunks (tenant_id, agent_id, source, path, start_line, end_line, text, terms,
    content_hash, model, dims, embedding)
SELECT $1, 'main', 'memory', 'memory/bank/bench-' || (g / 50) || '.md', g % 50 + 1, g % 50 + 1, t.text,
       to_tsvector('simple', t.terms), '\\x00', $2, 512,
       c.v + (SELECT array_agg((random() - 0.5) * 0.6)::real[]::vector FROM generate_series(1, 512) WHERE g >= 0)
FROM generate_series(0, $3 - 1) g
CROSS JOIN LATERAL (SELECT string_agg(p.piece, $5) AS text, string_agg(p.terms, ' ') AS terms
                    FROM (SELECT 1 + floor(random() * (SELECT count(*) FROM pieces))::int AS i
                          FROM generate_series(1, $4) WHERE g >= 0) pick
                    JOIN pieces p ON p.i = pick.i) t
JOIN centres c ON c.c = (g * 31 + $6) % 256
"""
CENTRES = "CREATE TEMP TABLE centres (c int, v vector)"
CENTRE = "INSERT INTO centres VALUES ($1, $2::real[]::vector)"
COUNT = """
INSERT INTO indexer.memory_counts (tenant_id, agent_id, chunks) VALUES ($1, 'main', $2)
ON CONFLICT (tenant_id, agent_id) DO UPDATE SET chunks = excluded.chunks
"""
INDEX_ROWS = "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'indexer.memory_chunks'::regclass"


def ann_settings(limit: int, agent_chunks: int, index_rows: int) -> tuple[str, str]:
    """Copy of recall's memory_queries.ann_settings."""
    share = max(agent_chunks, 1) / max(index_rows, agent_chunks, 1)
    bound = min(max(int(4 * limit / share), 20_000), 2_000_000)
    return str(min(max(2 * limit, 40), 1000)), str(bound)


async def _seed(owner_url: str, tenants: dict[int, str], model: str, text: Text, centres: np.ndarray) -> None:
    conn = await asyncpg.connect(owner_url)
    try:
        await conn.execute(CENTRES)
        await conn.executemany(CENTRE, [(i, c.tolist()) for i, c in enumerate(centres)])
        await conn.execute(PIECES, text.pieces, [to_tsvector_text(index_terms(p)) for p in text.pieces])
        await conn.execute(INDEX_PIECES)
        await conn.execute(DROP_HNSW)
        for size, tenant in tenants.items():
            background = size == BACKGROUND
            async with conn.transaction():
                await conn.execute("SELECT set_config('cairn.tenant_id', $1, true)", tenant)
                for first in range(0, size, 10_000):
                    n = min(10_000, size - first)
                    picks, joiner = (1, " ") if background else (text.picks, text.joiner)
                    await conn.execute(SEED, uuid.UUID(tenant), model, n, picks, joiner, size % 97 + first)
                await conn.execute(COUNT, uuid.UUID(tenant), size)
        await conn.execute(BUILD_HNSW)
        await conn.execute(SETTLE)
    finally:
        await conn.close()


async def _statement(
    pool: "asyncpg.Pool[asyncpg.Record]", kind: str, tenant: str, query: list[float], model: str, plan: tuple[int, int]
) -> tuple[float, list[tuple[str, float]]]:
    params = (uuid.UUID(tenant), "main", ["memory", "sessions"], None, None, query, model, POOL)
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT set_config('cairn.tenant_id', $1, true)", tenant)
        started = time.perf_counter()
        if kind == "hnsw":
            await conn.execute(SET_ANN, *ann_settings(POOL, *plan))
        rows = await conn.fetch(STATEMENTS[kind], *params)
        return time.perf_counter() - started, [(str(r["chunk_id"]), float(r["score"])) for r in rows]


async def _buffers(pool: "asyncpg.Pool[asyncpg.Record]", kind: str, tenant: str, query: list[float], model: str) -> int:
    params = (uuid.UUID(tenant), "main", ["memory", "sessions"], None, None, query, model, POOL)
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT set_config('cairn.tenant_id', $1, true)", tenant)
        plan = json.loads(await conn.fetchval("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + STATEMENTS[kind], *params))
    top = plan[0]["Plan"]
    return int(top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0))


def _ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 1)


async def _statements(
    app_url: str, owner_url: str, tenants: dict[int, str], model: str, queries: list[list[float]]
) -> list[dict[str, Any]]:
    """Each size: the three statements per query (order alternating), the first 3 queries again at the end so
    that the cache is warm for every timed one."""
    owner = await asyncpg.connect(owner_url)
    try:
        index_rows = int(await owner.fetchval(INDEX_ROWS))
    finally:
        await owner.close()
    pool = await asyncpg.create_pool(app_url, min_size=1, max_size=2)
    rows = []
    try:
        for size, tenant in tenants.items():
            times: dict[str, list[float]] = {k: [] for k in STATEMENTS}
            recall, identical = [], 0
            for i, query in enumerate(queries[3:] + queries[:3] if len(queries) > 3 else queries):
                found = {}
                for kind in list(STATEMENTS) if i % 2 == 0 else list(STATEMENTS)[::-1]:
                    spent, found[kind] = await _statement(pool, kind, tenant, query, model, (size, index_rows))
                    times[kind].append(spent)
                exact = {c for c, _ in found["exact"]}
                recall.append(len(exact & {c for c, _ in found["hnsw"]}) / max(len(exact), 1))
                identical += found["exact"] == found["exact, wide rows"]
            buffers = {k: await _buffers(pool, k, tenant, queries[0], model) for k in ("exact, wide rows", "exact")}
            rows.append({"chunks": size, **{f"{k} p50_ms": _ms(v[3:] or v) for k, v in times.items()},
                         **{f"{k} buffers": b for k, b in buffers.items()},
                         f"hnsw recall@{POOL}": round(statistics.fmean(recall), 3),
                         f"hnsw recall@{POOL} min": round(min(recall), 3),
                         "exact = wide rows": f"{identical}/{len(queries)}"})  # fmt: skip
    finally:
        await pool.close()
    return rows


def _searches(recall_url: str, keys: dict[int, str], questions: list[str]) -> list[dict[str, Any]]:
    clients = {size: httpx.Client(base_url=recall_url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
               for size, key in keys.items()}  # fmt: skip
    times: dict[int, list[float]] = {size: [] for size in keys}
    try:
        for client in clients.values():
            client.post("/v1/memory/search", json={"query": questions[0]}).raise_for_status()  # warm up
        for i, question in enumerate(questions):
            for size in list(keys) if i % 2 == 0 else list(keys)[::-1]:
                started = time.perf_counter()
                clients[size].post("/v1/memory/search", json={"query": question}).raise_for_status()
                times[size].append(time.perf_counter() - started)
    finally:
        for client in clients.values():
            client.close()
    base = statistics.median(times[min(keys)])
    return [{"chunks": size, "search p50_ms": _ms(t), "ratio to smallest": round(statistics.median(t) / base, 2),
             "queries": len(t)} for size, t in times.items()]  # fmt: skip


def run_sizes(
    endpoints: dict[str, str], sizes: tuple[int, ...], queries: int, data: Path | None = None
) -> list[dict[str, Any]]:
    owner_url = postgres_as(endpoints, "cairn_owner")
    rng = random.Random(11)
    text = synthetic_text(rng, queries) if data is None else conversation_text(rng, queries, data)
    keys = {size: new_tenant(endpoints, f"bench-sizes-{size}") for size in (*sizes, BACKGROUND)}
    with httpx.Client(
        base_url=endpoints["CAIRN_RECALL_URL"], headers={"Authorization": f"Bearer {keys[BACKGROUND]}"}
    ) as r:
        model = r.get("/v1/memory/status").raise_for_status().json()["model"]
    tenants = {size: asyncio.run(_tenant_of(owner_url, key)) for size, key in keys.items()}
    vectors = np.random.default_rng(3)
    centres = (vectors.random((256, 512)) - 0.5).astype(np.float32)
    asyncio.run(_seed(owner_url, tenants, model, text, centres))
    asked = [(centres[vectors.integers(256)] + (vectors.random(512) - 0.5) * 0.6).tolist() for _ in range(queries)]
    del tenants[BACKGROUND], keys[BACKGROUND]
    statements = asyncio.run(_statements(endpoints["CAIRN_POSTGRES_URL"], owner_url, tenants, model, asked))
    searches = _searches(endpoints["CAIRN_RECALL_URL"], keys, text.queries)
    return [{"text": text.label, **row, **search} for row, search in zip(statements, searches, strict=True)]
