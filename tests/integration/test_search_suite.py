"""The search suite against real Postgres: the indexer's own row function writes the corpus, the recall
service's own SQL ranks it. Every case must find its message and must not find the near miss; the
ranking rules (every term first, exact form over stem, recency as tie-breaker, stable pages) follow."""

import uuid
from datetime import UTC, datetime, timedelta
from typing import TypeAlias

import asyncpg
import pytest

from cairn.events import TranscriptAppended
from cairn.indexer import store
from cairn.recall.queries import MessageHit, Page, ReadStore, Scope
from cairn.storage.postgres import tenant_transaction
from cairn.text import build_query
from tests.search_cases import CASES, CORPUS, Case

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
START = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def _message(tenant: str, key: str, text: str, sender: str | None, at: datetime, position: int) -> TranscriptAppended:
    return TranscriptAppended(
        tenant_id=tenant, agent_id="main", occurred_at=at, session_key="agent:main:main",
        session_id=str(uuid.UUID(int=1)), position=position, reset_index=0, message_id=str(uuid.uuid4()),
        external_id=key, role="user", text=text, sender_name=sender, channel="test", chat_type="direct",
        token_estimate=len(text) // 4,
    )  # fmt: skip


async def _index(pool: Pool, tenant: str, messages: dict[str, tuple[str, str | None]]) -> None:
    """Writes through the indexer's row definition, one minute apart in the order given."""
    async with tenant_transaction(pool, tenant) as conn:
        for position, (key, (text, sender)) in enumerate(messages.items(), 1):
            event = _message(tenant, key, text, sender, START + timedelta(minutes=position), position)
            await store.insert_messages(conn, [store.message_row(event)])


async def _search(pool: Pool, tenant: str, query: str, limit: int = 25, offset: int = 0) -> list[MessageHit]:
    built = build_query(query)
    assert built is not None, f"nothing searchable in {query!r}"
    return await ReadStore(pool).search_messages(tenant, Scope(None, None), built, Page(limit, offset, 2000))


async def _keys(pool: Pool, tenant: str, query: str) -> list[str | None]:
    return [hit.external_id for hit in await _search(pool, tenant, query)]


@pytest.fixture(scope="module")
async def corpus(app_pool: Pool) -> str:
    tenant = str(uuid.uuid4())
    await _index(app_pool, tenant, CORPUS)
    return tenant


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
async def test_search_case(app_pool: Pool, corpus: str, case: Case) -> None:
    keys = await _keys(app_pool, corpus, case.query)
    assert case.found in keys, f"{case.query!r} did not find {case.found}: {keys}"
    assert case.not_found not in keys, f"{case.query!r} found {case.not_found}: {keys}"


async def test_the_suite_covers_every_language(corpus: str) -> None:
    prefixes = {case.id.split("-")[0] for case in CASES}
    assert len(CASES) >= 60
    assert {"en", "zh", "ja", "ko", "id", "mixed"} <= prefixes


async def _ranked(pool: Pool, query: str, messages: dict[str, str]) -> list[str | None]:
    tenant = str(uuid.uuid4())
    await _index(pool, tenant, {key: (text, None) for key, text in messages.items()})
    return await _keys(pool, tenant, query)


@pytest.mark.parametrize(
    ("query", "messages", "order"),
    [
        (
            "launch slides Shanghai",
            {
                "every": "I will bring the slides for the Shanghai launch",
                "one": "Shanghai Shanghai Shanghai, the weather in Shanghai is mild",
                "two": "the launch slides are not ready",
                "none": "lunch at noon",
            },
            ["every", "two", "one"],
        ),
        (
            "上海 发布会",
            {"some": "我下周去上海，上海很好", "every": "下周二我去上海参加产品发布会", "none": "我在北京工作"},
            ["every", "some"],
        ),
        (
            "running",
            {"stem": "she runs every day", "exact": "he was running every day"},
            ["exact", "stem"],
        ),
        (
            "ERR_CONN_RESET",
            {"parts": "the conn was reset by an err", "whole": "got ERR_CONN_RESET again"},
            ["whole"],
        ),
    ],
    ids=["every-term-first-en", "every-term-first-zh", "exact-form-over-stem", "identifier-not-its-loose-parts"],
)
async def test_ranking(app_pool: Pool, query: str, messages: dict[str, str], order: list[str]) -> None:
    assert await _ranked(app_pool, query, messages) == order


async def test_a_rare_term_outweighs_a_common_one(app_pool: Pool) -> None:
    """Inverse document frequency: among messages that each have one term, the rarer term wins."""
    messages = {f"common-{index}": f"meeting notes number {index}" for index in range(12)}
    messages["rare"] = "the zeppelin tour was fun"
    assert (await _ranked(app_pool, "meeting zeppelin", messages))[0] == "rare"


async def test_recency_breaks_ties(app_pool: Pool) -> None:
    ranked = await _ranked(app_pool, "dentist", {"older": "dentist at noon", "newer": "dentist at noon"})
    assert ranked == ["newer", "older"]


async def test_pages_are_stable_and_never_overlap(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    await _index(app_pool, tenant, {f"m{index}": ("same words here", None) for index in range(30)})
    whole = [hit.message_id for hit in await _search(app_pool, tenant, "words", limit=25)]
    again = [hit.message_id for hit in await _search(app_pool, tenant, "words", limit=25)]
    first = [hit.message_id for hit in await _search(app_pool, tenant, "words", limit=10)]
    second = [hit.message_id for hit in await _search(app_pool, tenant, "words", limit=10, offset=10)]
    assert whole == again
    assert first + second == whole[:20]
    assert len(set(first + second)) == 20


async def test_scores_fall_in_rank_order(app_pool: Pool, corpus: str) -> None:
    hits = await _search(app_pool, corpus, "the Shanghai launch slides 上海 running")
    scores = [hit.score for hit in hits]
    assert len(hits) > 3
    assert scores == sorted(scores, reverse=True)
    assert all(0 < score < 2 for score in scores)


async def test_an_older_message_with_every_term_is_not_crowded_out_by_recent_partial_matches(app_pool: Pool) -> None:
    """Candidates are capped at the most recent matches; the cap applies to partial and full matches apart."""
    tenant = str(uuid.uuid4())
    messages: dict[str, tuple[str, str | None]] = {"old-full": ("the invoice for Zanzibar is overdue", None)}
    messages |= {f"recent-{index}": (f"invoice number {index} arrived", None) for index in range(40)}
    await _index(app_pool, tenant, messages)
    built = build_query("Zanzibar invoice")
    assert built is not None
    hits = await ReadStore(app_pool).search_messages(tenant, Scope(None, None), built, Page(5, 0, 10))
    assert hits[0].external_id == "old-full"


MATCHES = "SELECT count(*) FROM indexer.matching_messages($1, $2::tsquery, NULL, NULL, 100)"


async def test_matching_runs_as_the_owner_but_answers_only_for_the_calling_tenant(app_pool: Pool, corpus: str) -> None:
    async with tenant_transaction(app_pool, corpus) as conn:
        assert await conn.fetchval(MATCHES, corpus, "'shanghai'") == 1
    async with tenant_transaction(app_pool, str(uuid.uuid4())) as conn:
        assert await conn.fetchval(MATCHES, corpus, "'shanghai'") == 0


COUNTS = "SELECT agent_id, messages FROM indexer.message_counts ORDER BY agent_id"


def _row(tenant: str, agent: str, text: str) -> tuple[object, ...]:
    event = _message(tenant, f"{agent}-{text}", text, None, START, 1).model_copy(update={"agent_id": agent})
    return store.message_row(event)


async def test_the_corpus_count_follows_every_insert_and_delete(app_pool: Pool) -> None:
    """BM25's corpus size is kept with the rows (0028): re-sent messages are not counted twice, deletes count out,
    and each tenant sees only its own counts."""
    tenant, other = str(uuid.uuid4()), str(uuid.uuid4())
    rows = [_row(tenant, "main", f"note {index}") for index in range(3)] + [_row(tenant, "helper", "a task")]
    async with tenant_transaction(app_pool, tenant) as conn:
        await store.insert_messages(conn, rows)
        await store.insert_messages(conn, [*rows[:2], _row(tenant, "main", "one more")])  # two already indexed
        assert [tuple(r) for r in await conn.fetch(COUNTS)] == [("helper", 1), ("main", 4)]
        await conn.execute("DELETE FROM indexer.messages WHERE agent_id = 'main' AND text LIKE 'note%'")
        assert [tuple(r) for r in await conn.fetch(COUNTS)] == [("helper", 1), ("main", 1)]
    async with tenant_transaction(app_pool, other) as conn:
        assert await conn.fetch(COUNTS) == []


async def test_the_corpus_size_weighs_a_term_by_the_whole_tenant(app_pool: Pool) -> None:
    """The same matches score higher once the tenant holds many messages without the term (a rarer term)."""
    tenant = str(uuid.uuid4())
    await _index(app_pool, tenant, {"a": ("the zeppelin tour", None), "b": ("zeppelin again", None)})
    before = [hit.score for hit in await _search(app_pool, tenant, "zeppelin")]
    async with tenant_transaction(app_pool, tenant) as conn:
        await store.insert_messages(conn, [_row(tenant, "main", f"unrelated chat {index}") for index in range(40)])
    after = [hit.score for hit in await _search(app_pool, tenant, "zeppelin")]
    assert len(before) == len(after) == 2
    assert all(later > earlier for earlier, later in zip(before, after, strict=True))


async def test_a_search_never_runs_inside_another_tenants_transaction(app_pool: Pool, corpus: str) -> None:
    """The search sets its tenant itself (one round trip); inside a transaction of another tenant it refuses."""
    search = "SELECT count(*) FROM indexer.search_messages($1, $2, $2, 10, 0, NULL, NULL, '{shanghai}', '{1}', 100)"
    async with tenant_transaction(app_pool, corpus) as conn:
        assert await conn.fetchval(search, uuid.UUID(corpus), "shanghai") == 1
    async with tenant_transaction(app_pool, str(uuid.uuid4())) as conn:
        with pytest.raises(asyncpg.RaiseError, match="another tenant"):
            await conn.fetchval(search, uuid.UUID(corpus), "shanghai")


async def test_an_empty_first_page_means_the_phrase_matches_nothing(app_pool: Pool, corpus: str) -> None:
    """What the phrase fallback relies on to skip its probe on page one (recall.api._ranked): when the first
    page of a query is empty, the one-candidate probe (`_any_hit`) finds nothing either."""
    store, empty = ReadStore(app_pool), 0
    phrases = [case.query for case in CASES] + [" ".join(reversed(case.query.split())) for case in CASES]
    for text in [f'"{phrase}"' for phrase in phrases]:
        built = build_query(text)
        if built is None:
            continue
        for candidates in (100, 1000):
            if not await store.search_messages(corpus, Scope(None, None), built, Page(10, 0, candidates)):
                empty += 1
                assert not await store.search_messages(corpus, Scope(None, None), built, Page(1, 0, 1)), text
    assert empty >= 4  # reversed phrases that match nothing are among them
