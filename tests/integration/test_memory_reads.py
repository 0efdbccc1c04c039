"""Memory search's candidate reads against real Postgres, written through the indexer's own chunk rows:
lexical matching runs as the owner but answers only for the calling tenant and the agent, sources and
session it is asked for, ranks a bounded set of the most recent matches (without crowding out an older
chunk with every term), and the details and turn cosines are what the ranking would compute itself."""

import asyncio
import hashlib
import uuid
from datetime import UTC, datetime, timedelta
from typing import TypeAlias

import asyncpg
import numpy as np
import pytest

from cairn.memindex import store
from cairn.platform.postgres import tenant_transaction
from cairn.recall import memory_queries
from cairn.recall.memory_queries import MemoryReads, Where
from cairn.text import build_query, index_terms, to_tsvector_literal

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
START = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
MODEL, DIMS = "test-model", 8


def _row(text: str, minutes: int, *, path: str = "memory/bank/notes.md", session: str | None = None) -> store.ChunkRow:
    at = START + timedelta(minutes=minutes)
    common = {"start_line": minutes, "end_line": minutes, "text": text, "occurred_at": at,
              "terms": to_tsvector_literal(index_terms(text)),
              "content_hash": hashlib.sha256(text.encode()).digest()}  # fmt: skip
    if session is None:
        return store.ChunkRow("memory", path=path, **common)  # type: ignore[arg-type]
    return store.ChunkRow("sessions", session_key=session, session_id=uuid.uuid4(), **common)  # type: ignore[arg-type]


async def _write(pool: Pool, tenant: str, rows: list[store.ChunkRow], agent: str = "main") -> list[str]:
    """Chunk ids in the order of `rows`, matched by text (every text is unique here)."""
    vectors = np.random.default_rng(3).normal(size=(len(rows), DIMS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    async with tenant_transaction(pool, tenant) as conn:
        await store.insert_chunks(conn, uuid.UUID(tenant), agent, rows, MODEL, vectors)
        found = await conn.fetch("SELECT chunk_id::text, text FROM indexer.memory_chunks WHERE agent_id = $1", agent)
    ids = {r["text"]: r["chunk_id"] for r in found}
    return [ids[r.text] for r in rows]


async def _lexical(reads: MemoryReads, where: Where, query: str, limit: int = 10) -> dict[str, float]:
    built = build_query(query)
    assert built is not None
    return await reads.lexical(where, built.any_terms, built.all_terms, limit)


def _where(tenant: str, sources: tuple[str, ...] = ("memory", "sessions"), exclude: str | None = None) -> Where:
    return Where(tenant, "main", sources, exclude)


async def test_matching_runs_as_the_owner_but_answers_only_for_the_calling_tenant(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    await _write(app_pool, tenant, [_row("the lighthouse keeper retired", 1)])
    matches = "SELECT count(*) FROM indexer.matching_memory_chunks($1, 'main', '{memory}', NULL, $2::tsquery, 100)"
    async with tenant_transaction(app_pool, tenant) as conn:
        assert await conn.fetchval(matches, uuid.UUID(tenant), "'lighthouse'") == 1
    async with tenant_transaction(app_pool, str(uuid.uuid4())) as conn:
        assert await conn.fetchval(matches, uuid.UUID(tenant), "'lighthouse'") == 0
    assert await _lexical(MemoryReads(app_pool), _where(str(uuid.uuid4())), "lighthouse") == {}


async def test_matching_keeps_to_the_agent_the_sources_and_outside_the_callers_session(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    note, other_session, own_session = await _write(
        app_pool,
        tenant,
        [
            _row("parcel for the harbour office", 1),
            _row("User: the parcel reached the harbour", 2, session="agent:main:telegram:1"),
            _row("User: where is my parcel", 3, session="agent:main:main"),
        ],
    )
    await _write(app_pool, tenant, [_row("another agent's parcel", 4)], agent="helper")
    reads = MemoryReads(app_pool)
    assert set(await _lexical(reads, _where(tenant), "parcel")) == {note, other_session, own_session}
    assert set(await _lexical(reads, _where(tenant, ("memory",)), "parcel")) == {note}
    assert set(await _lexical(reads, _where(tenant, exclude="agent:main:main"), "parcel")) == {note, other_session}


async def test_only_the_most_recent_matches_are_ranked(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    ids = await _write(app_pool, tenant, [_row(f"invoice number {i} arrived", i) for i in range(20)])
    found = await _lexical(MemoryReads(app_pool, lexical_candidates=5), _where(tenant), "invoice", limit=10)
    assert set(found) == set(ids[-5:])
    assert len(await _lexical(MemoryReads(app_pool, lexical_candidates=50), _where(tenant), "invoice")) == 10


async def test_an_older_chunk_with_every_term_is_not_crowded_out_by_recent_partial_matches(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    rows = [_row("the invoice for Zanzibar is overdue", 0)]
    rows += [_row(f"invoice number {i} arrived", i + 1) for i in range(40)]
    ids = await _write(app_pool, tenant, rows)
    found = await _lexical(MemoryReads(app_pool, lexical_candidates=10), _where(tenant), "Zanzibar invoice", limit=5)
    assert max(found, key=lambda key: found[key]) == ids[0]
    assert found[ids[0]] > 1.0  # every term


async def test_details_bring_the_vector_and_the_asked_words_present(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    (chunk,) = await _write(app_pool, tenant, [_row("the garden needs rain before the marathon", 1)])
    async with tenant_transaction(app_pool, tenant) as conn:
        stored = await conn.fetchval(
            "SELECT embedding::real[] FROM indexer.memory_chunks WHERE chunk_id = $1::uuid", chunk
        )
    reads = MemoryReads(app_pool)
    (detail,), _ = await reads.details(tenant, [chunk], MODEL, ["garden", "rain", "piano"], [chunk])
    assert detail.embedding is not None
    np.testing.assert_allclose(detail.embedding, np.asarray(stored, dtype=np.float32))
    assert detail.present == {"garden", "rain"}
    assert detail.lexemes == frozenset(index_terms(detail.text))
    (unmatched,), _ = await reads.details(tenant, [chunk], MODEL, ["garden"], [])
    assert unmatched.lexemes is None  # has a vector, was not found by its words: not needed
    (other_model,), _ = await reads.details(tenant, [chunk], "another-model", ["garden"], [])
    assert other_model.embedding is None
    assert other_model.lexemes == detail.lexemes


async def test_details_bring_the_query_cosine_of_every_turn_of_a_transcript_candidate(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    (chunk,) = await _write(app_pool, tenant, [_row("User: rain\nAssistant: sun", 1, session="agent:main:main")])
    messages = [uuid.uuid4(), uuid.uuid4()]
    turns = np.random.default_rng(5).normal(size=(2, DIMS)).astype(np.float32)
    turns /= np.linalg.norm(turns, axis=1, keepdims=True)
    async with tenant_transaction(app_pool, tenant) as conn:
        await conn.execute(
            "UPDATE indexer.memory_chunks SET message_ids = $1 WHERE chunk_id = $2::uuid", messages, chunk
        )
        for position, (message, vector) in enumerate(zip(messages, turns, strict=True)):
            await conn.execute(
                "INSERT INTO indexer.memory_turns (tenant_id, agent_id, session_id, position, reset_index, session_key,"
                " message_id, role, text, occurred_at, model, embedding)"
                " VALUES ($1, 'main', $2, $3, 0, 'agent:main:main', $4, 'user', 'x', now(), $5, $6::real[]::vector)",
                uuid.UUID(tenant), uuid.uuid4(), position, message, MODEL, vector.tolist(),
            )  # fmt: skip
    query = turns[0] + 0.5 * turns[1]
    reads = MemoryReads(app_pool)
    _, cosines = await reads.details(tenant, [chunk], MODEL, [], [], query.tolist())
    assert cosines.keys() == {str(m) for m in messages}
    for message, vector in zip(messages, turns, strict=True):
        assert cosines[str(message)] == pytest.approx(float(np.dot(vector, query)), abs=1e-5)
    assert (await reads.details(tenant, [chunk], MODEL, [], []))[1] == {}  # no query vector: none asked
    assert (await reads.details(tenant, [chunk], "another-model", [], [], query.tolist()))[1] == {}


async def _waiting_statement(pool: Pool, statement: str) -> bool:
    """Whether a connection of this role sits idle in a transaction whose last statement was `statement`."""
    async with pool.acquire() as conn:
        return bool(
            await conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE state = 'idle in transaction' AND query = $1)",
                statement,
            )
        )


@pytest.mark.parametrize("exact_up_to", [10_000, 0], ids=["small agent: exact", "large agent: hnsw settings"])
async def test_the_vector_sql_is_prepared_while_the_query_vector_is_still_computing(
    app_pool: Pool, exact_up_to: int
) -> None:
    """The transaction, the agent's size and (for a large agent) the HNSW settings come before the vector: the
    connection waits idle in its transaction after that last statement, and the answer, once the vector is
    ready, is the one of a search given the vector at once."""
    tenant = str(uuid.uuid4())
    await _write(app_pool, tenant, [_row(f"note {i} about the harbour", i) for i in range(12)])
    query = np.random.default_rng(8).normal(size=DIMS).astype(np.float32)
    reads, where = MemoryReads(app_pool), _where(tenant)
    last = memory_queries.SET_ANN if exact_up_to == 0 else memory_queries.PLAN_INPUTS
    vector: asyncio.Future[list[float] | None] = asyncio.get_running_loop().create_future()
    searching = asyncio.ensure_future(reads.vector_when_ready(where, vector, MODEL, 5, exact_up_to))
    for _ in range(200):
        if await _waiting_statement(app_pool, last):
            break
        await asyncio.sleep(0.02)
    else:
        pytest.fail("the vector side did not prepare its transaction before the vector was ready")
    assert not searching.done()
    vector.set_result(query.tolist())
    found = await searching
    assert len(found) == 5
    assert found == await reads.vector(where, query.tolist(), MODEL, 5, exact_up_to)


async def test_no_query_vector_after_all_means_no_vector_candidates(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    await _write(app_pool, tenant, [_row("the harbour at dawn", 1)])
    vector: asyncio.Future[list[float] | None] = asyncio.get_running_loop().create_future()
    vector.set_result(None)
    assert await MemoryReads(app_pool).vector_when_ready(_where(tenant), vector, MODEL, 5) == {}
    assert len(await MemoryReads(app_pool).vector(_where(tenant), [1.0] * DIMS, MODEL, 5)) == 1
