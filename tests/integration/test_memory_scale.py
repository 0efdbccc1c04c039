"""A small agent sharing the HNSW index with a huge one still gets its full top-k (DESIGN §4).

A filtered HNSW scan returns the nearest rows of the whole index and only then applies the filter: 20
chunks among 200,000 are almost never among them. Memory search therefore scans a small agent's rows
exactly, and sizes pgvector's iterative scan by the agent's share of the index for a large one; this
test shows the plain scan starving and both of ours filling the list.

It runs in a database of its own, seeded directly in SQL: vectors are cluster centres plus noise (real
embeddings cluster too), and the HNSW index is rebuilt after the bulk load with the graph parameters of
migration 0023 (pgvector's m 16, ef_construction 64). A lighter graph (m 8, ef_construction 32) built
faster but now and then left the query's cluster unreachable from the entry point, so the large agent's
search returned far vectors: the test must walk the graph production builds.
"""

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from pydantic import SecretStr

from cairn.local import LocalStack
from cairn.recall.memory_queries import ANN_VECTOR, MemoryReads, Where
from cairn.storage.postgres import create_pool
from cairn.storage.settings import PostgresSettings
from tests.integration.conftest import own_database

pytestmark = pytest.mark.integration

BIG, SMALL, MODEL = str(uuid.uuid4()), str(uuid.uuid4()), "test-model"
BIG_CHUNKS, SMALL_CHUNKS, K = 200_000, 20, 10

SEED = f"""
CREATE TEMP TABLE centres AS SELECT c, (SELECT array_agg(random() - 0.5)::real[]::vector
    FROM generate_series(1, 512) WHERE c >= 0) AS v FROM generate_series(0, 255) c;
CREATE TEMP TABLE noise AS SELECT n, (SELECT array_agg((random() - 0.5) * 0.6)::real[]::vector
    FROM generate_series(1, 512) WHERE n >= 0) AS v FROM generate_series(0, 999) n;
DROP INDEX indexer.memory_chunks_hnsw_512;
-- the full-text keys and the recency walk's index (term bits) serve no vector search: not kept up over 200k rows
DROP INDEX indexer.memory_chunk_keys_terms;
DROP INDEX indexer.memory_chunks_recent;
INSERT INTO indexer.memory_chunks (tenant_id, agent_id, source, path, start_line, end_line, text, terms,
    content_hash, model, dims, embedding)
SELECT '{BIG}', 'main', 'memory', 'memory/bank/big.md', g, g, 'big', '', '\\x00', '{MODEL}', 512, c.v + n.v
FROM generate_series(1, {BIG_CHUNKS}) g JOIN centres c ON c.c = g % 256 JOIN noise n ON n.n = (g * 7919) % 1000;
INSERT INTO indexer.memory_chunks (tenant_id, agent_id, source, path, start_line, end_line, text, terms,
    content_hash, model, dims, embedding)
SELECT '{SMALL}', 'main', 'memory', 'memory/bank/small.md', g, g, 'small', '', '\\x00', '{MODEL}', 512,
       c.v + n.v
FROM generate_series(1, {SMALL_CHUNKS}) g JOIN centres c ON c.c = (g * 37) % 256 JOIN noise n ON n.n = g;
INSERT INTO indexer.memory_counts VALUES ('{BIG}', 'main', {BIG_CHUNKS}), ('{SMALL}', 'main', {SMALL_CHUNKS});
SET maintenance_work_mem = '1GB';
CREATE INDEX memory_chunks_hnsw_512 ON indexer.memory_chunks
    USING hnsw ((embedding::vector(512)) vector_cosine_ops) WITH (m = 16, ef_construction = 64) WHERE dims = 512;
ANALYZE indexer.memory_chunks;
"""
# The query: the first centre, which none of the small agent's chunks is built on.
QUERY = "SELECT v::real[] FROM centres WHERE c = 0"
EXACT_TOP = """
SELECT chunk_id::text, 1 - (embedding <=> $2::real[]::vector) AS score FROM indexer.memory_chunks
WHERE tenant_id = $1 ORDER BY embedding <=> $2::real[]::vector LIMIT $3
"""
# What a naive filtered HNSW query does: the index hands over its ef_search nearest, then the filter runs.
PLAIN_ANN = """
SELECT chunk_id FROM indexer.memory_chunks
WHERE dims = 512 AND tenant_id = $1 AND agent_id = 'main' AND model = $3
ORDER BY embedding::vector(512) <=> $2::real[]::vector(512) LIMIT $4
"""


@pytest.fixture(scope="module")
async def scale_db(stack: LocalStack) -> AsyncIterator[tuple[str, list[float]]]:
    async with own_database(stack, "cairn_scale") as name:
        superuser = await asyncpg.connect(stack.database_url(name, "postgres"))
        try:
            await superuser.execute(SEED)
            query = list(await superuser.fetchval(QUERY))
            yield stack.database_url(name), query
        finally:
            await superuser.close()


@pytest.fixture(scope="module")
async def pool(scale_db: tuple[str, list[float]]) -> AsyncIterator["asyncpg.Pool[asyncpg.Record]"]:
    created = await create_pool(PostgresSettings(url=SecretStr(scale_db[0]), pool_min=1, pool_max=2))
    try:
        yield created
    finally:
        await created.close()


def _where(tenant: str) -> tuple[object, ...]:
    return uuid.UUID(tenant), "main", ["memory"], None, None  # no session left out, every path


async def _exact(pool: "asyncpg.Pool[asyncpg.Record]", tenant: str, query: list[float], k: int = K) -> dict[str, float]:
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT set_config('cairn.tenant_id', $1, true)", tenant)
        return {r["chunk_id"]: r["score"] for r in await conn.fetch(EXACT_TOP, uuid.UUID(tenant), query, k)}


def _true_neighbours(found: dict[str, float], exact: dict[str, float]) -> int:
    """How many of the found chunks are as near as the last of `exact` (ids tie where vectors repeat)."""
    last = min(exact.values())
    return sum(score >= last - 1e-6 for score in found.values())


async def test_a_plain_filtered_hnsw_scan_starves_the_small_agent(
    pool: "asyncpg.Pool[asyncpg.Record]", scale_db: tuple[str, list[float]]
) -> None:
    """The control: without our strategy the small agent gets (almost) nothing."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT set_config('cairn.tenant_id', $1, true)", SMALL)
        await conn.execute("SET LOCAL hnsw.iterative_scan = off")
        await conn.execute("SET LOCAL enable_sort = off")  # walk the HNSW index, as the planner does for most agents
        rows = await conn.fetch(PLAIN_ANN, uuid.UUID(SMALL), scale_db[1], MODEL, K)
    assert len(rows) < K


async def test_the_small_agent_gets_its_exact_top_k(
    pool: "asyncpg.Pool[asyncpg.Record]", scale_db: tuple[str, list[float]]
) -> None:
    found = await MemoryReads(pool).vector(Where(SMALL, "main", ("memory",), None), scale_db[1], MODEL, K)
    assert list(found) == list(await _exact(pool, SMALL, scale_db[1]))


async def test_the_iterative_hnsw_scan_also_fills_a_minority_agents_list(
    pool: "asyncpg.Pool[asyncpg.Record]", scale_db: tuple[str, list[float]]
) -> None:
    """Forced onto the HNSW path (as an agent above the exact-scan size would be), the iterative scan
    sized by the agent's share still returns a full list of the agent's own nearest chunks."""
    reads = MemoryReads(pool)
    found = await reads.vector(Where(SMALL, "main", ("memory",), None), scale_db[1], MODEL, K, exact_up_to=0)
    exact = await _exact(pool, SMALL, scale_db[1])
    assert len(found) == K
    assert _true_neighbours(found, exact) >= 8  # approximate search: most of the true top 10
    assert list(found.values()) == sorted(found.values(), reverse=True)
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT set_config('cairn.tenant_id', $1, true)", SMALL)
        await conn.execute("SELECT set_config('enable_sort', 'off', true)")
        plan = await conn.fetch("EXPLAIN " + ANN_VECTOR[512], *_where(SMALL), scale_db[1], MODEL, K)
    assert "memory_chunks_hnsw_512" in "\n".join(row[0] for row in plan)


async def test_the_large_agent_is_searched_through_hnsw_and_gets_its_top_k(
    pool: "asyncpg.Pool[asyncpg.Record]", scale_db: tuple[str, list[float]]
) -> None:
    found = await MemoryReads(pool).vector(Where(BIG, "main", ("memory",), None), scale_db[1], MODEL, K)
    # hundreds of chunks sit about equally near the query's cluster centre: an approximate search is right
    # when what it returns is among the nearest 0.05% (the exact top 100 of 200,000)
    exact = await _exact(pool, BIG, scale_db[1], 100)
    assert len(found) == K
    assert _true_neighbours(found, exact) >= 8
