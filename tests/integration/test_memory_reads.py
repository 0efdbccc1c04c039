"""Memory search's candidate reads against real Postgres, written through the indexer's own chunk rows:
lexical matching runs as the owner but answers only for the calling tenant and the agent, sources and
session it is asked for, ranks a bounded set of the most recent matches (without crowding out an older
chunk with every term), and the details and turn cosines are what the ranking would compute itself."""

import asyncio
import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, TypeAlias

import asyncpg
import numpy as np
import pytest

from cairn.memindex import LocalEmbedder, store
from cairn.recall import memory_queries
from cairn.recall.memory_dates import days_named, month_days, on_day
from cairn.recall.memory_queries import ChunkDetail, MemoryReads, Where
from cairn.recall.memory_ranking import RankingOptions
from cairn.recall.memory_search import Found, MemoryQuery, MemorySearch
from cairn.storage.postgres import tenant_transaction
from cairn.text import build_query, index_terms, to_tsvector_literal

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
START = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
MODEL, DIMS = "test-model", 8


# The read before 0107, a filter over all the agent's chunks (ties broken by chunk_id): the day index must agree.
ON_DAYS_SCANNING = f"""
SELECT chunk_id, 0.0 AS score FROM indexer.memory_chunks
WHERE {memory_queries._FILTER}
  AND to_char(coalesce(dated::timestamptz, occurred_at) AT TIME ZONE 'UTC', 'MM-DD') = ANY($6::text[])
ORDER BY occurred_at, start_line, chunk_id
LIMIT $7
"""


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
    assert await reads.turn_cosines(tenant, [str(m) for m in messages], MODEL, query.tolist()) == cosines
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


def _same_details(found: list[ChunkDetail], read: list[ChunkDetail]) -> None:
    """Equal field by field (a vector by its float32 values: a dataclass of arrays cannot compare itself)."""
    assert [d.chunk_id for d in found] == [d.chunk_id for d in read]
    for a, b in zip(found, read, strict=True):
        assert replace(a, embedding=None) == replace(b, embedding=None)
        assert (a.embedding is None) == (b.embedding is None)
        if a.embedding is not None and b.embedding is not None:
            assert a.embedding.dtype == b.embedding.dtype == np.float32
            np.testing.assert_array_equal(a.embedding, b.embedding)


def _by_id(details: list[ChunkDetail]) -> list[ChunkDetail]:
    return sorted(details, key=lambda d: d.chunk_id)


async def _mixed_agent(pool: Pool, tenant: str) -> list[str]:
    """Notes and transcript chunks with vectors of MODEL, and notes whose vector is of another model."""
    rows = [_row(f"the harbour parcel note {i}", i, path=f"memory/bank/{i % 3}.md") for i in range(8)]
    rows += [_row(f"User: a parcel at the harbour, part {i}", 10 + i, session="agent:main:main") for i in range(4)]
    ids = await _write(pool, tenant, rows)
    others = [_row(f"the old harbour ledger {i}", 20 + i) for i in range(3)]
    vectors = np.ones((len(others), DIMS), dtype=np.float32) / np.sqrt(DIMS)
    async with tenant_transaction(pool, tenant) as conn:
        await store.insert_chunks(conn, uuid.UUID(tenant), "main", others, "another-model", vectors)
    return ids


@pytest.mark.parametrize("query", ["harbour parcel", "parcel ledger", "harbour"])
async def test_the_lexical_side_brings_the_rows_details_would_read_for_its_matches(app_pool: Pool, query: str) -> None:
    """Same scores as `lexical`, and each candidate's row as `details` reads a lexical match: its lexemes, the
    asked ones present, a vector only of the searched model (the ledger notes have another one)."""
    tenant = str(uuid.uuid4())
    await _mixed_agent(app_pool, tenant)
    built = build_query(query)
    assert built is not None
    reads, where, asked = MemoryReads(app_pool, lexical_candidates=6), _where(tenant), list(built.terms)
    scores, rows = await reads.lexical_rows(where, built.any_terms, built.all_terms, 9, MODEL, asked)
    assert scores == await reads.lexical(where, built.any_terms, built.all_terms, 9)
    assert len(scores) >= 6  # the caps bind (6 per tsquery), so the rows are a chosen few of 15
    read, _ = await reads.details(tenant, list(scores), MODEL, asked, list(scores))
    _same_details(_by_id(rows), _by_id(read))
    assert all(d.lexemes for d in rows)
    assert all((d.embedding is None) == ("ledger" in d.text) for d in rows)
    assert any("ledger" in d.text for d in rows)  # the recent any-term matches: the cap of 6 full ones < 9


@pytest.mark.parametrize("exact_up_to", [10_000, 0], ids=["small agent: exact", "large agent: hnsw"])
async def test_the_vector_side_brings_the_rows_details_would_read_for_its_candidates(
    app_pool: Pool, exact_up_to: int
) -> None:
    """Same scores as `vector`, and each candidate's row as `details` reads a chunk its words did not find: no
    lexemes (it has a vector of the model), the asked words present."""
    tenant = str(uuid.uuid4())
    await _mixed_agent(app_pool, tenant)
    query = np.random.default_rng(9).normal(size=DIMS).astype(np.float32)
    reads, where, asked = MemoryReads(app_pool), _where(tenant), ["harbour", "part"]
    vector: asyncio.Future[list[float] | None] = asyncio.get_running_loop().create_future()
    vector.set_result(query.tolist())
    scores, rows = await reads.vector_rows_when_ready(where, vector, MODEL, 7, asked, exact_up_to)
    assert scores == await reads.vector(where, query.tolist(), MODEL, 7, exact_up_to)
    assert len(scores) == 7
    read, _ = await reads.details(tenant, list(scores), MODEL, asked, [])
    _same_details(_by_id(rows), _by_id(read))
    assert all(d.lexemes is None and d.embedding is not None for d in rows)
    assert {d.present for d in rows} >= {frozenset({"harbour"}), frozenset({"harbour", "part"})}
    none: asyncio.Future[list[float] | None] = asyncio.get_running_loop().create_future()
    none.set_result(None)
    assert await reads.vector_rows_when_ready(where, none, MODEL, 7, asked, exact_up_to) == ({}, [])


class _CountingDetails(MemoryReads):
    """The real reads, counting calls to `details`."""

    details_calls = 0

    async def details(self, *args: Any) -> tuple[list[ChunkDetail], dict[str, float]]:
        self.details_calls += 1
        return await super().details(*args)


class _SearchAsBefore(MemorySearch):
    """Memory search as it was before the sides brought their candidates' rows: one `details` read of every
    candidate with the turn cosines, after both sides; its rows in chunk_id order, the order of its plan (by
    primary key) for a search's few candidates, which a table's changing statistics can turn into a bitmap
    scan in heap order: so that tied chunks rank the same every time, the rows are now sorted."""

    async def _details(
        self,
        tenant: str,
        ids: Sequence[str],
        brought: Sequence[ChunkDetail],
        asked: Sequence[str],
        lexical: dict[str, float],
        query: list[float] | None,
    ) -> tuple[list[ChunkDetail], dict[str, float]]:
        rows, cosines = await self._reads.details(tenant, ids, self._embedder.model, asked, list(lexical), query)
        return sorted(rows, key=lambda d: uuid.UUID(d.chunk_id)), cosines


def _answer(found: Found) -> list[tuple[object, ...]]:
    return [(h.detail.chunk_id, h.score, h.snippet, h.citation, h.message_scores) for h in found.hits]


async def test_a_search_answers_the_same_when_its_sides_bring_the_candidates_rows(app_pool: Pool) -> None:
    """Notes (some twice under another path: equal scores, so the candidates' order decides), dated notes and
    transcript chunks, with the local model's vectors. Searched with the rows the sides bring, and as before
    (every row read by `details` after both sides): the same hits, scores, snippets and citations; `details`
    is read only for chunks of a day the query names that neither side found."""
    topics = ["the harbour parcel came late", "piano lessons on tuesday", "budget for the garden",
              "the marathon training plan", "a recipe with peanuts", "the dentist moved the meeting"]  # fmt: skip
    rows = [_row(f"{topic}, note {i}", i, path=f"memory/bank/{i}.md") for i, topic in enumerate(topics * 6)]
    rows += [_row(f"{topic}, note {i}", i, path=f"memory/copy/{i}.md") for i, topic in enumerate(topics)]
    rows += [replace(_row(f"daily: {topic}", 30 + i, path=f"memory/daily/{i}.md"), dated=date(2026, 11, 3 + i % 2))
             for i, topic in enumerate(topics)]  # fmt: skip
    rows += [_row(f"User: {topic}?", 40 + i, session=f"agent:main:telegram:{i}") for i, topic in enumerate(topics)]
    embedder = LocalEmbedder()
    tenant = str(uuid.uuid4())
    dated = [r for r in rows if "/copy/" not in (r.path or "")]  # another agent: no copies, so no ties
    async with tenant_transaction(app_pool, tenant) as conn:
        for agent, written in (("main", rows), ("dated", dated)):
            vectors = embedder.encode([r.text for r in written])
            await store.insert_chunks(conn, uuid.UUID(tenant), agent, written, embedder.model, vectors)
    reads = _CountingDetails(app_pool)
    fast, before = MemorySearch(reads, embedder, RankingOptions()), _SearchAsBefore(reads, embedder, RankingOptions())
    days = ["what did I note on November 3", "4 nov", "2026-11-03", "11月4日"]
    # no word of these is in the notes: copies tie on the vector side alone, where nothing orders them
    meanings = ["keyboard instrument practice", "money plans for plants", "running a long race", "tooth doctor"]
    queries = [*topics, *meanings, "harbour garden", "what about the parcel", *days]
    read_after = 0
    # candidate pools (3 per result) that take every chunk of `main`: which of two tied copies a smaller pool cuts
    # off is the sort's choice, in either way of searching; on `dated`, a pool of 18 leaves chunks to find by day
    runs = [("main", 20, ("memory",)), ("main", 30, ("memory", "sessions")), ("dated", 6, ("memory",))]
    for agent, limit, sources in runs:
        for text in queries:
            query = MemoryQuery(agent, text, limit, None, sources, None)
            reads.details_calls = 0
            answered = await fast.search(tenant, query)
            assert reads.details_calls <= (1 if days_named(text) else 0)
            read_after += reads.details_calls
            assert _answer(answered) == _answer(await before.search(tenant, query))
            assert len(answered.hits) == limit
    assert read_after > 0  # some dated chunk was found by its day alone


async def test_the_chunks_of_named_days_are_those_dated_on_them_in_any_time_zone_read_by_the_day_index(
    app_pool: Pool, admin: "asyncpg.Connection[asyncpg.Record]"
) -> None:
    """ON_DAYS keeps a chunk whose day (its `dated`, else the UTC day of `occurred_at`) is a named month-day, in
    time order, as the statement before migration 0107 did; the session's time zone does not move a dated note's
    day; and the read walks the (tenant, agent, day) index rather than all the agent's chunks."""
    tenant = str(uuid.uuid4())
    rows = [_row(f"filler note {i}", i * 60 * 7) for i in range(300)]  # one every 7 hours from 1 November 2026
    rows.append(replace(_row("the daily note of 16 June", 5), dated=date(2026, 6, 16)))
    rows.append(_row("said late on 3 November UTC", 2 * 24 * 60 + 14 * 60 + 59))
    ids = await _write(app_pool, tenant, rows)
    days = days_named("what happened on 16 June and on November 3?")
    expected = [(r.occurred_at, r.start_line, i) for i, r in enumerate(rows) if on_day(r.dated or r.occurred_at, days)]
    wanted = [ids[i] for *_, i in sorted(expected)]
    assert len(wanted) >= 4
    assert {ids[300], ids[301]} <= set(wanted)
    assert await MemoryReads(app_pool).on_days(_where(tenant), month_days(days), 50) == wanted
    scanning = (*memory_queries._params(_where(tenant)), month_days(days), 50)
    params = (*memory_queries._params(_where(tenant))[:4], month_days(days), 50)  # ON_DAYS has no paths
    async with tenant_transaction(app_pool, tenant) as conn:
        assert [str(r["chunk_id"]) for r in await conn.fetch(ON_DAYS_SCANNING, *scanning)] == wanted
        await conn.execute("SET LOCAL TimeZone = 'Pacific/Kiritimati'")  # UTC+14: a date's midnight is the day before
        assert [str(r["chunk_id"]) for r in await conn.fetch(memory_queries.ON_DAYS, *params)] == wanted
        assert await conn.fetch(memory_queries.ON_DAYS, uuid.uuid4(), *params[1:]) == []  # another tenant's: nothing
    await admin.execute("ANALYZE indexer.memory_chunks")  # what autovacuum does before long
    plans: list[str] = []
    admin.add_log_listener(lambda _, message: plans.append(str(message.message)))
    try:
        async with admin.transaction():  # the function's own plan, as auto_explain sees it
            await admin.execute(
                "LOAD 'auto_explain'; SET LOCAL auto_explain.log_min_duration = 0; "
                "SET LOCAL auto_explain.log_nested_statements = on; SET LOCAL auto_explain.log_level = notice; "
                "SET LOCAL enable_seqscan = off"  # a small table
            )
            await admin.execute("SELECT set_config('cairn.tenant_id', $1, true)", tenant)
            await admin.fetch(memory_queries.ON_DAYS, *params)
    finally:
        admin.remove_log_listener(plans.append)  # type: ignore[arg-type]
    assert any("memory_chunks_month_day" in plan for plan in plans), "\n".join(plans)


async def test_the_status_counts_come_from_an_index_only_scan_in_path_order(
    app_pool: Pool, admin: "asyncpg.Connection[asyncpg.Record]"
) -> None:
    """GET /v1/memory/status's counts: by source, distinct documents, chunks without a vector of the current model,
    the last indexing time. One covering index answers them without reading the wide chunk rows or sorting paths
    (at 100k chunks the rows took seconds)."""
    tenant = str(uuid.uuid4())
    rows = [_row(f"note {n}", n, path=f"memory/bank/{n % 3}.md") for n in range(9)]
    await _write(app_pool, tenant, [*rows, _row("a turn", 20, session="agent:main:main")])
    await _write(app_pool, tenant, [_row("elsewhere", 30)], agent="other")
    reads = MemoryReads(app_pool)
    chunks = (await reads.status(tenant, "main", MODEL))["chunks"]
    assert (chunks["memory_chunks"], chunks["session_chunks"], chunks["documents"]) == (9, 1, 3)
    assert chunks["without_vector"] == 0
    assert (await reads.status(tenant, "main", "a-newer-model"))["chunks"]["without_vector"] == 10
    await admin.execute("VACUUM (ANALYZE) indexer.memory_chunks")  # as autovacuum would: pages all-visible
    async with tenant_transaction(app_pool, tenant) as conn:
        await conn.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off")  # a small table
        plan = "\n".join(r[0] for r in await conn.fetch(
            f"EXPLAIN {memory_queries.STATUS_CHUNKS}", uuid.UUID(tenant), "main", MODEL))  # fmt: skip
    assert "Index Only Scan using memory_chunks_status" in plan, plan
    assert "Sort" not in plan, plan


async def test_lexical_candidates_are_scored_as_they_are_found_and_only_their_scores_are_sorted(
    app_pool: Pool,
) -> None:
    """The lexical statement keeps (chunk_id, score) per candidate, not its terms: a chunk of 20 turns has 5-7 kB
    of them. Only the functions' scans, the bounded sort that keeps each function's best matches by ts_rank and
    the scores computed from them read terms; the same scores as ranking by definition, for a query where both
    functions run and find the same chunks (fewer than asked for: all of them are candidates)."""
    tenant = str(uuid.uuid4())
    texts = ["the lighthouse keeper retired in june", "the lighthouse needs a keeper", "a keeper of bees",
             "the old lighthouse", "retired sailors meet at the harbour"]  # fmt: skip
    await _write(app_pool, tenant, [_row(text, minutes) for minutes, text in enumerate(texts)])
    built = build_query("lighthouse keeper retired")
    assert built is not None
    params = (uuid.UUID(tenant), "main", ["memory", "sessions"], None, None, built.any_terms, built.all_terms, 300, 10)
    async with tenant_transaction(app_pool, tenant) as conn:
        plan = [r[0] for r in await conn.fetch("EXPLAIN (VERBOSE, COSTS OFF) " + memory_queries.LEXICAL, *params)]
        found = {str(r["chunk_id"]): float(r["score"]) for r in await conn.fetch(memory_queries.LEXICAL, *params)}
        expected = await conn.fetch(
            "SELECT chunk_id::text, ts_rank_cd(terms, $2::tsquery, 32) + CASE WHEN terms @@ $3::tsquery THEN 1.0 "
            "ELSE 0.0 END AS score FROM indexer.memory_chunks WHERE tenant_id = $1 AND terms @@ $2::tsquery",
            uuid.UUID(tenant), built.any_terms, built.all_terms,
        )  # fmt: skip
    assert found == {r["chunk_id"]: float(r["score"]) for r in expected}
    assert len(found) == 5
    node = ""
    for line in plan:
        if "->" in line or not line.startswith(" "):
            node = line.strip().removeprefix("->").strip()
        elif line.strip().startswith("Output:") and ".terms" in line:
            assert node.startswith(("Function Scan", "Sort", "Limit", "Subquery Scan", "Result")), "\n".join(plan)
    assert not any(line.strip().startswith("CTE Scan") and "terms" in line for line in plan), "\n".join(plan)


async def test_lexical_candidates_are_the_matches_holding_most_asked_words_scored_by_cover_density(
    app_pool: Pool,
) -> None:
    """Of more matches than asked for, the candidates are those ts_rank puts first (how many of the asked words a
    chunk holds, each with a saturating frequency), not those ts_rank_cd puts first (the total count of asked
    words: one word said six times outranks two words once each); a candidate's score is still ts_rank_cd's.
    Cover() walks every position of the asked words, so ranking each function's hundreds of matches by it
    was most of the lexical statement's ranking cost at 100k chunks; now only the best `limit` are."""
    tenant = str(uuid.uuid4())
    repeated, both, alone = await _write(app_pool, tenant, [
        _row("keeper keeper keeper keeper keeper keeper", 1), _row("the lighthouse keeper", 2),
        _row("a keeper of bees", 3),
    ])  # fmt: skip
    built = build_query("lighthouse keeper retired")
    assert built is not None
    reads = MemoryReads(app_pool)
    found = await _lexical(reads, _where(tenant), "lighthouse keeper retired", limit=1)
    assert list(found) == [both]
    async with tenant_transaction(app_pool, tenant) as conn:
        cover = await conn.fetchval(
            "SELECT ts_rank_cd(terms, $2::tsquery, 32) FROM indexer.memory_chunks WHERE chunk_id = $1::uuid",
            both, built.any_terms,
        )  # fmt: skip
    assert found[both] == float(cover)
    everything = await _lexical(reads, _where(tenant), "lighthouse keeper retired", limit=3)
    assert max(everything, key=lambda key: everything[key]) == repeated  # all ranked: the same scores as before
    assert set(everything) == {repeated, both, alone}


# What memory_chunk_vectors holds by definition (libs/memindex V0002): a row per chunk with a vector, its filters.
VECTORS = """
SELECT chunk_id, agent_id, source, session_key, model, embedding::text FROM indexer.memory_chunk_vectors
WHERE tenant_id = $1 ORDER BY chunk_id
"""
CHUNKS_AS_VECTORS = """
SELECT chunk_id, agent_id, source, session_key, model, embedding::text FROM indexer.memory_chunks
WHERE tenant_id = $1 AND embedding IS NOT NULL ORDER BY chunk_id
"""


async def test_the_exact_scans_narrow_vector_rows_follow_the_chunks_through_writes_reembedding_and_deletes(
    app_pool: Pool, admin: "asyncpg.Connection[asyncpg.Record]"
) -> None:
    """The exact scan reads memory_chunk_vectors, kept by triggers: after inserts, a re-embedding with another
    model, a chunk losing its vector and a document's deletion it holds what memory_chunks defines, and the scan
    finds the same chunks, same scores, as a scan of memory_chunks itself."""
    tenant = str(uuid.uuid4())
    ids = await _write(app_pool, tenant, [_row(f"note {i}", i, path=f"memory/bank/{i % 2}.md") for i in range(6)])
    ids += await _write(app_pool, tenant, [_row("a remembered line", 7, session="chat-1")])
    where, query = _where(tenant), np.random.default_rng(9).normal(size=DIMS).astype(np.float32)

    async def same_as_defined() -> list[asyncpg.Record]:
        rows = await admin.fetch(VECTORS, uuid.UUID(tenant))
        assert rows == await admin.fetch(CHUNKS_AS_VECTORS, uuid.UUID(tenant))
        return rows

    assert len(await same_as_defined()) == 7
    old_scan = memory_queries.EXACT_VECTOR.replace("indexer.memory_chunk_vectors", "indexer.memory_chunks")
    async with tenant_transaction(app_pool, tenant) as conn:
        params = (*memory_queries._params(where), query.tolist(), MODEL, 5)
        expected = {str(r["chunk_id"]): r["score"] for r in await conn.fetch(old_scan, *params)}
    assert len(expected) == 5
    assert await MemoryReads(app_pool).vector(where, query.tolist(), MODEL, 5) == expected

    reembedded = np.eye(DIMS, dtype=np.float32)[:2]
    async with tenant_transaction(app_pool, tenant) as conn:
        await store.set_vectors(conn, uuid.UUID(tenant), [uuid.UUID(c) for c in ids[:2]], "other-model", reembedded)
        await conn.execute(
            "UPDATE indexer.memory_chunks SET model = NULL, dims = NULL, embedding = NULL WHERE chunk_id = $1",
            uuid.UUID(ids[2]),
        )
        await store.delete_document(conn, uuid.UUID(tenant), "main", "memory/bank/1.md")
    rows = await same_as_defined()
    assert {str(r["chunk_id"]) for r in rows} == {ids[0], ids[4], ids[6]}  # 1, 3, 5 deleted, 2 without a vector
    assert {str(r["chunk_id"]): r["model"] for r in rows}[ids[0]] == "other-model"
    found = await MemoryReads(app_pool).vector(where, query.tolist(), MODEL, 5)
    assert set(found) == {ids[4], ids[6]}
    other = await MemoryReads(app_pool).vector(where, [1.0] + [0.0] * (DIMS - 1), "other-model", 5)
    assert other == {ids[0]: pytest.approx(1.0)}
