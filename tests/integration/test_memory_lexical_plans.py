"""Memory search's lexical matching chooses its plan per call from the agent's own newest chunks (migration 0058):
a term in many of them walks the agent back in time, a rare one reads the full-text index, whatever the table-wide
statistics say; both ways answer the most recent `cap` matches, the same rows."""

import random
import uuid
from typing import TypeAlias

import asyncpg
import pytest

from cairn.storage.postgres import tenant_transaction
from cairn.text import build_query
from tests.integration.test_memory_reads import _row, _write
from tests.integration.test_search_keys import plans_of_every_statement
from tests.search_cases import CASES, CORPUS

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
Admin: TypeAlias = "asyncpg.Connection[asyncpg.Record]"

MATCHES = "SELECT chunk_id::text FROM indexer.matching_memory_chunks($1, 'main', $2::text[], $3, $4::tsquery, $5)"
# The answer by definition: the most recent `cap` matches, read as the owner without any of the functions.
EXPECTED = """
SELECT chunk_id::text FROM indexer.memory_chunks
WHERE tenant_id = $1 AND agent_id = 'main' AND source = ANY($2::text[])
  AND ($3::text IS NULL OR session_key IS DISTINCT FROM $3) AND terms @@ $4::tsquery
ORDER BY occurred_at DESC NULLS LAST, chunk_id LIMIT $5
"""
WALKED, BITMAP = "memory_chunks_recent", "Bitmap Index Scan on memory_chunk_keys_terms"


async def _chunks(pool: Pool, texts: list[str]) -> str:
    """A tenant whose agent holds one chunk per text, the last one the newest."""
    tenant = str(uuid.uuid4())
    rows = [_row(text, minutes) for minutes, text in enumerate(texts)]
    rows[-1:] = [_row(texts[-1], len(texts), session="agent:main:telegram:1")]  # the newest is a transcript chunk
    await _write(pool, tenant, rows)
    return tenant


async def _matches(
    admin: Admin, tenant: str, query: str, cap: int, *, sources: tuple[str, ...] = ("memory", "sessions"),
    exclude: str | None = None
) -> tuple[list[str], str]:  # fmt: skip
    """The function's answer as the calling tenant, and the plans of the statements it ran."""
    plans = await plans_of_every_statement(admin)
    await admin.execute("SELECT set_config('cairn.tenant_id', $1, false)", tenant)
    rows = await admin.fetch(MATCHES, uuid.UUID(tenant), list(sources), exclude, query, cap)
    await admin.execute("LOAD 'auto_explain'")
    await admin.execute("SET auto_explain.log_min_duration = -1")
    expected = await admin.fetch(EXPECTED, uuid.UUID(tenant), list(sources), exclude, query, cap)
    assert [r[0] for r in rows] == [r[0] for r in expected]
    return [r[0] for r in rows], "\n".join(plans)


async def test_a_term_in_most_of_the_newest_chunks_walks_back_and_a_rare_one_reads_the_index(
    app_pool: Pool, admin: Admin
) -> None:
    """Statistics say nothing here (no ANALYZE of these rows): the newest chunks decide."""
    texts = [f"routine chat number {i}" + (" about the zeppelin tour" if i % 500 == 7 else "") for i in range(1500)]
    tenant = await _chunks(app_pool, texts)
    walked, plans = await _matches(admin, tenant, "'routine'", 50)
    assert len(walked) == 50
    assert WALKED in plans, plans
    assert BITMAP not in plans, plans
    rare, plans = await _matches(admin, tenant, "'zeppelin' & 'tour'", 50)
    assert len(rare) == 3
    assert BITMAP in plans, plans


async def test_the_plan_follows_the_agent_not_the_table_wide_statistics(app_pool: Pool, admin: Admin) -> None:
    """One tenant has 'harbour' in every chunk, another in a few of its 1,500; after ANALYZE the table's statistics
    call it frequent (or rare) for both. Each agent still gets the plan its own chunks call for."""
    everywhere = await _chunks(app_pool, [f"harbour log entry {i}" for i in range(3000)])
    few = await _chunks(app_pool, [f"garden note {i}" + (" harbour" if i % 400 == 3 else "") for i in range(1500)])
    await admin.execute("ANALYZE indexer.memory_chunks")
    walked, plans = await _matches(admin, everywhere, "'harbour'", 40)
    assert len(walked) == 40
    assert WALKED in plans, plans
    assert BITMAP not in plans, plans
    rare, plans = await _matches(admin, few, "'harbour'", 40)
    assert len(rare) == 4
    assert BITMAP in plans, plans


@pytest.mark.parametrize("query", ["'routine'", "'zeppelin' & 'tour'", "'routine' | 'zeppelin'", "'absent'"])
@pytest.mark.parametrize(("sources", "exclude"), [(("memory", "sessions"), None), (("memory",), None),
                                                  (("memory", "sessions"), "agent:main:telegram:1")])  # fmt: skip
async def test_both_plans_answer_the_most_recent_matches_of_the_agent_sources_and_session(
    app_pool: Pool, admin: Admin, query: str, sources: tuple[str, ...], exclude: str | None
) -> None:
    texts = [f"routine chat number {i}" + (" about the zeppelin tour" if i % 50 == 7 else "") for i in range(400)]
    texts.append("routine: the zeppelin tour is booked")  # the newest, a transcript chunk
    tenant = await _chunks(app_pool, texts)
    for cap in (1, 5, 300, 1000):
        await _matches(admin, tenant, query, cap, sources=sources, exclude=exclude)


async def test_another_tenants_matches_are_never_answered(app_pool: Pool, admin: Admin) -> None:
    tenant = await _chunks(app_pool, ["zeppelin tour one", "zeppelin tour two"])
    await admin.execute("SELECT set_config('cairn.tenant_id', $1, false)", str(uuid.uuid4()))
    assert await admin.fetch(MATCHES, uuid.UUID(tenant), ["memory", "sessions"], None, "'zeppelin'", 10) == []
    async with tenant_transaction(app_pool, str(uuid.uuid4())) as conn:
        assert await conn.fetch(MATCHES, uuid.UUID(tenant), ["memory", "sessions"], None, "'zeppelin'", 10) == []
    for helper in ("memory_matches_walking", "memory_matches_by_bitmap"):
        async with tenant_transaction(app_pool, tenant) as conn:  # only the dispatcher is granted
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.fetch(f"SELECT * FROM indexer.{helper}($1, 'main', '{{memory}}', NULL, 'zeppelin', 10)",
                                 uuid.UUID(tenant))  # fmt: skip
    async with tenant_transaction(app_pool, tenant) as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.fetch("SELECT * FROM indexer.memory_matches_in_paths($1, 'main', '{memory}', NULL, 'zeppelin', "
                             "10, '{MEMORY.md}')", uuid.UUID(tenant))  # fmt: skip
    async with tenant_transaction(app_pool, tenant) as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.fetch("SELECT * FROM indexer.memory_matches_sample($1, 'main', '{memory}', NULL, 'zeppelin', "
                             "repeat('0', 512)::bit(512), 10)", uuid.UUID(tenant))  # fmt: skip


async def test_a_conjunction_in_a_few_of_the_newest_chunks_walks_the_index_entries_by_their_term_bits(
    app_pool: Pool, admin: Admin
) -> None:
    """2.5% of the chunks hold both words: too few for a plain walk to the cap, enough for the walk by bits, which
    reads the recency index alone and fetches only the chunks whose bits hold both words' bits."""
    texts = [f"routine chat number {i}" + (" about the zeppelin tour" if i % 40 == 7 else "") for i in range(3000)]
    tenant = await _chunks(app_pool, texts)
    found, plans = await _matches(admin, tenant, "'zeppelin' & 'tour'", 300)
    assert len(found) == 75
    assert "Index Only Scan using memory_chunks_recent" in plans, plans
    assert BITMAP not in plans, plans


async def test_a_conjunction_whose_bits_nearly_every_chunk_holds_reads_the_index_not_the_walk_by_bits(
    app_pool: Pool, admin: Admin
) -> None:
    """1% of the chunks hold all three words, but every chunk holds their bits ('jeanette' shares 'jean''s first four
    characters, the name and the verb are everywhere): a walk by bits would fetch every chunk it walks, so the
    full-text index answers (migration 0108), the same rows."""
    texts = [f"maria meets {'jean' if i % 100 == 7 else 'jeanette'} at the market, note {i}" for i in range(3000)]
    tenant = await _chunks(app_pool, texts)
    found, plans = await _matches(admin, tenant, "'maria' & 'meet' & 'jean'", 300)
    assert len(found) == 30
    assert BITMAP in plans, plans
    assert "Index Only Scan using memory_chunks_recent" not in plans, plans


async def test_a_walk_by_bits_that_would_read_most_of_a_large_agents_entries_reads_the_index_instead(
    app_pool: Pool, admin: Admin
) -> None:
    """The newest 128 chunks hold one match and six chunks with the query's bits ('zepplin tourniquet' shares the
    first four characters of both words), so the walk by bits would fetch few chunks; but for an agent of 100,000
    chunks (its count in memory_counts, which the plan is chosen from; the rows here are 3,000) one match in 128
    means reading about 38,400 index entries for the cap, so the full-text index answers (migration 0124; 0108
    walked by bits), the same rows."""
    texts = [f"routine chat number {i}" + (" about the zeppelin tour" if i % 500 == 499
                                           else " about a zepplin tourniquet" if i % 25 == 0 else "")
             for i in range(3000)]  # fmt: skip
    tenant = await _chunks(app_pool, texts)
    await admin.execute("UPDATE indexer.memory_counts SET chunks = 100000 WHERE tenant_id = $1 AND agent_id = 'main'",
                        uuid.UUID(tenant))  # fmt: skip
    await admin.execute("SELECT set_config('cairn.tenant_id', $1, false)", tenant)
    sample = await admin.fetchrow(
        "SELECT * FROM indexer.memory_matches_sample($1, 'main', '{memory,sessions}', NULL, $2::tsquery, "
        "indexer.required_term_bits($2::tsquery), 128)", uuid.UUID(tenant), "'zeppelin' & 'tour'"
    )  # fmt: skip
    assert sample is not None
    assert (sample["seen"], sample["matched"], sample["passed"]) == (128, 1, 6)
    found, plans = await _matches(admin, tenant, "'zeppelin' & 'tour'", 300)
    assert len(found) == 6
    assert BITMAP in plans, plans
    assert "Index Only Scan using memory_chunks_recent" not in plans, plans
    # the same agent at its real size (3,000 entries to read at most) still walks by bits
    await admin.execute("UPDATE indexer.memory_counts SET chunks = 3000 WHERE tenant_id = $1 AND agent_id = 'main'",
                        uuid.UUID(tenant))  # fmt: skip
    found, plans = await _matches(admin, tenant, "'zeppelin' & 'tour'", 300)
    assert len(found) == 6
    assert "Index Only Scan using memory_chunks_recent" in plans, plans
    assert BITMAP not in plans, plans


async def test_the_required_term_bits_never_leave_out_a_chunk_the_query_matches(app_pool: Pool, admin: Admin) -> None:
    """For every search suite query (all words, any word) over the suite's texts as chunks: a chunk its terms match
    holds every required bit. Some queries do have required bits (or nothing would be checked)."""
    tenant = await _chunks(app_pool, [text for text, _ in CORPUS.values()])
    missed = """
    WITH q AS (SELECT $2::tsquery AS query, indexer.required_term_bits($2::tsquery) AS required)
    SELECT count(*) FILTER (WHERE terms @@ q.query AND (term_bits & q.required) <> q.required),
           count(*) FILTER (WHERE terms @@ q.query), bool_or(q.required <> repeat('0', 512)::bit(512))
    FROM indexer.memory_chunks, q WHERE tenant_id = $1
    """
    matched, with_bits = 0, 0
    for case in CASES:
        built = build_query(case.query)
        assert built is not None
        for query in (built.all_terms, built.any_terms):
            row = await admin.fetchrow(missed, uuid.UUID(tenant), query)
            assert row is not None
            assert row[0] == 0, f"{case.id}: {query!r} leaves out {row[0]} of {row[1]} chunks"
            matched += row[1]
            with_bits += bool(row[2]) and row[1] > 0
    assert matched > len(CASES)
    assert with_bits > len(CASES) // 2


@pytest.mark.parametrize(
    ("terms", "query", "bits"),
    [
        ("'it''s':1 'fine':2", "'it''s' & 'fine'", 2),
        ("'back\\\\slash':1 'x':2", "'back\\\\slash' & 'x'", 2),
        ("'one':1 'two':5", "'one' & ('two' | 'three')", 1),
        ("'one':1 'two':5", "'one' | 'two'", 0),
        # a word and its stem share a bit (their first four characters), so the group is required ...
        ("'releas':1 'bicycl':2", "('released' | 'releas') & ('bicycles' | 'bicycl')", 2),
        ("'danc':1 'fast':2", "('dancing' | 'danc') & 'fast'", 2),
        # ... unless the stem is shorter: then the group is not checked
        ("'run':1 'fast':2", "('running' | 'run') & 'fast'", 1),
        # phrases are decided as the conjunction of their lexemes, which every match of the phrase holds
        ("'one':1 'two':5", "'one' <4> 'two'", 2),
        ("'config':1 'loader':2 'x':3", "('config_loader' | 'config' <-> 'loader') & 'x'", 2),
        ("'a':1 'b':2", "'a' <-> 'b' | 'c'", 0),
        ("'发布':1 '布会':2 '发':1", "'发布' & '布会'", 2),
        ("'prefixed':1 'x':2", "'prefix':* & 'x'", 0),
        ("'weighted':1A 'x':2", "'weighted':A & 'x'", 0),
        ("'one':1 'two':2", "'one' & !'three'", 0),
    ],
)
async def test_required_term_bits_of_query_shapes(admin: Admin, terms: str, query: str, bits: int) -> None:
    """Quoting survives; a word's group and a phrase are required; NOT, prefixes and weights (which presence alone
    does not decide) get no bits."""
    shapes = """
    WITH q AS (SELECT indexer.required_term_bits($2::tsquery) AS required)
    SELECT $1::tsvector @@ $2::tsquery, (indexer.term_bits($1::tsvector) & q.required) = q.required,
           length(replace(q.required::text, '0', ''))
    FROM q
    """
    row = await admin.fetchrow(shapes, terms, query)
    assert row is not None
    assert row[0] is True  # the query matches the terms ...
    assert row[1] is True  # ... and the terms hold every required bit
    assert row[2] == bits


_VOCABULARY = """
    release released releases releasing running runs runner ran dying dies lying family families allergy allergies
    bicycle bicycles garden gardening parcel parcels relay relax reliable support group supported
    err_conn_reset config_loader.py v2.3.1 api.example.com 上海 发布会 海上 東京に行 서울에 갑니다
"""
"""Inflected words sharing prefixes and stems (and a few that do not: 'dying' -> 'die'), identifiers, CJK runs."""
_WORDS = _VOCABULARY.split()


def _random_text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _random_query(rng: random.Random, texts: list[str]) -> str:
    """Loose words, words a chunk holds, and quoted phrases cut out of a chunk (so that phrases do match)."""
    shape = rng.randrange(4)
    if shape == 0:
        return _random_text(rng, rng.randint(1, 6))
    words = rng.choice(texts).split()
    start = rng.randrange(len(words))
    cut = words[start : start + rng.randint(1, 4)]
    if shape == 1:
        return " ".join(cut)
    if shape == 2:
        return f'"{" ".join(cut)}"'
    return f'{_random_text(rng, rng.randint(0, 2))} "{" ".join(cut)}" {rng.choice(_WORDS)}'


async def test_no_chunk_a_query_matches_lacks_a_required_bit_over_many_query_shapes(
    app_pool: Pool, admin: Admin
) -> None:
    """Random chunks of inflected words (sharing prefixes and stems), identifiers and CJK runs; 400 random queries
    (words, quoted phrases cut out of a chunk, both), each as all words and as any word: every chunk the query
    matches holds the query's required bits, so the walk by bits leaves none out. Most queries have bits and
    match chunks (or nothing would be checked), phrases included."""
    rng = random.Random(5)
    texts = [_random_text(rng, rng.randint(4, 30)) + f" n{i}" for i in range(300)]
    tenant = await _chunks(app_pool, texts)
    missed = """
    WITH q AS (SELECT $2::tsquery AS query, indexer.required_term_bits($2::tsquery) AS required)
    SELECT count(*) FILTER (WHERE terms @@ q.query AND (term_bits & q.required) <> q.required),
           count(*) FILTER (WHERE terms @@ q.query), bool_or(q.required <> repeat('0', 512)::bit(512))
    FROM indexer.memory_chunks, q WHERE tenant_id = $1
    """
    checked, with_bits, phrases_with_bits = 0, 0, 0
    for _ in range(400):
        text = _random_query(rng, texts)
        built = build_query(text)
        assert built is not None, text
        for query in (built.all_terms, built.any_terms):
            row = await admin.fetchrow(missed, uuid.UUID(tenant), query)
            assert row is not None
            assert row[0] == 0, f"{text!r}: {query!r} leaves out {row[0]} of {row[1]} chunks"
            checked += row[1] > 0
            with_bits += bool(row[2]) and row[1] > 0
            phrases_with_bits += bool(row[2]) and row[1] > 0 and "<" in query
    assert checked > 550
    assert with_bits > 330
    assert phrases_with_bits > 100


BY_BITMAP = "SELECT chunk_id::text FROM indexer.memory_matches_by_bitmap($1, 'main', $2::text[], $3, $4::tsquery, $5)"
KEYS = """
SELECT chunk_id, agent_id, source, session_key, occurred_at, lexemes::text FROM indexer.memory_chunk_keys
WHERE tenant_id = $1 ORDER BY chunk_id
"""
# What memory_chunk_keys holds by definition: a row per chunk, its filters and its lexemes without positions.
CHUNKS_AS_KEYS = """
SELECT chunk_id, agent_id, source, session_key, occurred_at, strip(terms)::text FROM indexer.memory_chunks
WHERE tenant_id = $1 ORDER BY chunk_id
"""


async def test_the_index_way_sorts_narrow_key_rows_and_fetches_only_the_chunks_it_answers(
    app_pool: Pool, admin: Admin
) -> None:
    """A word in a third of 900 chunks: the full-text keys are read over memory_chunk_keys (narrow rows, migration
    0135), the matches sorted there, and only the `cap` newest chunks fetched by primary key, not every match's
    row; the same rows as by definition."""
    texts = [f"routine chat number {i}" + (" about the zeppelin tour" if i % 3 == 0 else "") for i in range(900)]
    tenant = await _chunks(app_pool, texts)
    plans = await plans_of_every_statement(admin)
    await admin.execute("SELECT set_config('cairn.tenant_id', $1, false)", tenant)
    await admin.execute("SET auto_explain.log_analyze = on")
    rows = await admin.fetch(BY_BITMAP, uuid.UUID(tenant), ["memory", "sessions"], None, "'zeppelin' & 'tour'", 20)
    await admin.execute("SET auto_explain.log_min_duration = -1")
    await admin.execute("SET auto_explain.log_analyze = off")
    expected = await admin.fetch(EXPECTED, uuid.UUID(tenant), ["memory", "sessions"], None, "'zeppelin' & 'tour'", 20)
    assert [r[0] for r in rows] == [r[0] for r in expected]
    assert len(rows) == 20
    plan = "\n".join(plans)
    assert "Bitmap Heap Scan on memory_chunk_keys" in plan, plan
    assert "Bitmap Heap Scan on memory_chunks " not in plan, plan
    assert "Index Scan using memory_chunks_pkey on memory_chunks" in plan, plan
    assert "rows=300.00 loops=1" in plan, plan  # every match's narrow row
    assert "loops=20)" in plan, plan  # and the chunks of the 20 answered, nothing else


async def test_a_phrase_the_keys_take_as_a_conjunction_is_still_decided_by_the_chunks_terms(
    app_pool: Pool, admin: Admin
) -> None:
    """The keys hold no positions: 'hand <-> painted' is 'hand & painted' for them, so chunks with both words in the
    other order ("painted by hand") come out of the index and the chunk's own terms leave them out, before the cap."""
    texts = [f"note {i}: " + ("a hand painted bowl" if i % 4 == 0 else "painted by hand, a bowl") for i in range(200)]
    tenant = await _chunks(app_pool, texts)
    await admin.execute("SELECT set_config('cairn.tenant_id', $1, false)", tenant)
    args = (uuid.UUID(tenant), ["memory", "sessions"], None, "'hand' <-> 'painted'")
    for cap in (5, 50, 300):
        rows = await admin.fetch(BY_BITMAP, *args, cap)
        assert [r[0] for r in rows] == [r[0] for r in await admin.fetch(EXPECTED, *args, cap)]
        assert len(rows) == min(cap, 50)


async def test_the_keys_follow_every_insert_update_and_delete_of_the_chunks(app_pool: Pool, admin: Admin) -> None:
    tenant = await _chunks(app_pool, [f"garden note {i} about the harbour" for i in range(30)])
    await admin.execute("SELECT set_config('cairn.tenant_id', $1, false)", tenant)
    keys = uuid.UUID(tenant)
    assert len(await admin.fetch(KEYS, keys)) == 30
    assert await admin.fetch(KEYS, keys) == await admin.fetch(CHUNKS_AS_KEYS, keys)
    await admin.execute("""UPDATE indexer.memory_chunks SET occurred_at = occurred_at - interval '1 day',
                               session_key = 'agent:main:telegram:9', terms = to_tsvector('simple', 'lighthouse')
                           WHERE tenant_id = $1 AND start_line % 3 = 0""", keys)  # fmt: skip
    await admin.execute("UPDATE indexer.memory_chunks SET model = 'another-model' WHERE tenant_id = $1", keys)
    await admin.execute("DELETE FROM indexer.memory_chunks WHERE tenant_id = $1 AND start_line % 5 = 0", keys)
    assert len(await admin.fetch(KEYS, keys)) == 23  # start lines 0-28 and 30 (the transcript)
    assert await admin.fetch(KEYS, keys) == await admin.fetch(CHUNKS_AS_KEYS, keys)
    found = await admin.fetch(BY_BITMAP, keys, ["memory", "sessions"], None, "'lighthouse'", 300)
    assert len(found) == 8


TRUSTED = ["MEMORY.md", "memory/bank/"]
TRUSTED_MATCHES = (
    "SELECT chunk_id::text FROM indexer.matching_memory_chunks($1, 'main', '{memory}', NULL, $2::tsquery, $3, $4)"
)
# The answer by definition for lane 1's trusted paths: the most recent `cap` matching chunks of those paths.
TRUSTED_EXPECTED = """
SELECT chunk_id::text FROM indexer.memory_chunks
WHERE tenant_id = $1 AND agent_id = 'main' AND source = 'memory' AND terms @@ $2::tsquery
  AND (path = 'MEMORY.md' OR starts_with(path, 'memory/bank/'))
ORDER BY occurred_at DESC NULLS LAST, chunk_id LIMIT $3
"""
DIRECT_READ = "starts_with(c.path, p)))\n                       AND c.terms @@ p_query"


async def _trusted(admin: Admin, tenant: str, query: str, cap: int) -> tuple[list[str], str]:
    plans = await plans_of_every_statement(admin)
    await admin.execute("SELECT set_config('cairn.tenant_id', $1, false)", tenant)
    rows = await admin.fetch(TRUSTED_MATCHES, uuid.UUID(tenant), query, cap, TRUSTED)
    expected = await admin.fetch(TRUSTED_EXPECTED, uuid.UUID(tenant), query, cap)
    assert [r[0] for r in rows] == [r[0] for r in expected]
    return [r[0] for r in rows], "\n".join(plans)


async def test_trusted_matches_among_the_newest_chunks_are_walked_and_sparse_ones_read_through_the_keys(
    app_pool: Pool, admin: Admin
) -> None:
    """Lane 1's trusted paths: when the newest 4 x cap chunks hold `cap` trusted matches, the walk by recency
    answers and the keys' GIN is never read; when they hold fewer, the full-text keys' GIN finds the matches (not
    a read of every chunk of the paths). Either way the most recent `cap` trusted matches, daily notes and other
    words left out."""
    tenant = str(uuid.uuid4())
    rows = [_row(f"harbour fact {i}", i, path="MEMORY.md" if i % 2 else f"memory/bank/b{i % 7}.md") for i in range(400)]
    rows += [_row(f"harbour daily {i}", 400 + i, path="memory/daily/2026-12-01.md") for i in range(30)]
    rows += [_row(f"garden fact {i}", 430 + i, path="MEMORY.md") for i in range(30)]
    await _write(app_pool, tenant, rows)
    walked, plans = await _trusted(admin, tenant, "'harbour'", 40)
    assert len(walked) == 40
    assert BITMAP not in plans, plans
    sparse = str(uuid.uuid4())
    rows = [_row(f"harbour fact {i}", i, path="MEMORY.md") for i in range(10)]
    rows += [_row(f"harbour daily {i}", 10 + i, path="memory/daily/2026-12-01.md") for i in range(300)]
    await _write(app_pool, sparse, rows)
    read, plans = await _trusted(admin, sparse, "'harbour'", 40)
    assert len(read) == 10
    assert BITMAP in plans, plans
    assert DIRECT_READ not in plans, plans


TRUSTED_BY_DEFINITION = """
SELECT chunk_id::text FROM indexer.memory_chunks
WHERE tenant_id = $1 AND agent_id = 'main' AND source = ANY($2::text[]) AND terms @@ $3::tsquery
  AND ($4::text IS NULL OR session_key IS DISTINCT FROM $4)
  AND EXISTS (SELECT 1 FROM unnest($5::text[]) p WHERE path = p OR (right(p, 1) = '/' AND starts_with(path, p)))
ORDER BY occurred_at DESC NULLS LAST, chunk_id LIMIT $6
"""
TRUSTED_MATCHES_OF = (
    "SELECT chunk_id::text FROM indexer.matching_memory_chunks($1, 'main', $2::text[], $3, $4::tsquery, $5, $6)"
)


@pytest.mark.parametrize("query", ["'harbour'", "'harbour' & 'lighthouse'", "'harbour' <-> 'lighthouse'",
                                   "'lighthouse' | 'garden'", "'absent'"])  # fmt: skip
@pytest.mark.parametrize("paths", [["MEMORY.md", "memory/bank/"], ["memory/bank/"], ["MEMORY.md"]])
async def test_the_trusted_matches_read_through_the_keys_are_the_most_recent_matches_of_the_paths(
    app_pool: Pool, admin: Admin, query: str, paths: list[str]
) -> None:
    """Whichever way answers (the walk, or the keys' GIN when it falls short), the rows are those of the
    definition, in its order: paths as prefixes or exact, a phrase checked on the chunk's own terms (the keys hold
    no positions), daily notes, another word's chunks, an excluded session and equal times all in the way."""
    tenant = str(uuid.uuid4())
    rng = random.Random(29)
    words = ["harbour lighthouse", "lighthouse harbour", "harbour", "lighthouse", "garden", "harbour and lighthouse"]
    paths_of = ["MEMORY.md", "memory/bank/a.md", "memory/bank/sub/b.md", "memory/2026-12-01.md", "memory/bankrupt.md"]
    rows = [_row(f"{rng.choice(words)} note {i}", rng.randrange(300), path=rng.choice(paths_of)) for i in range(600)]
    rows += [_row(f"harbour lighthouse said {i}", 300 + i, session="agent:main:telegram:1") for i in range(20)]
    await _write(app_pool, tenant, rows)
    await admin.execute("SELECT set_config('cairn.tenant_id', $1, false)", tenant)
    for cap in (1, 7, 40, 300):
        for sources, exclude in ((["memory"], None), (["memory", "sessions"], "agent:main:telegram:1")):
            args = (uuid.UUID(tenant), sources, exclude, query, cap, paths)
            rows_found = await admin.fetch(TRUSTED_MATCHES_OF, *args)
            expected = await admin.fetch(TRUSTED_BY_DEFINITION, uuid.UUID(tenant), sources, query, exclude, paths, cap)
            assert [r[0] for r in rows_found] == [r[0] for r in expected], (cap, sources)
