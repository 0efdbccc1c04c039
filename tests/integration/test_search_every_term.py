"""The every-term candidates are looked for only past the oldest any-term candidate (migration 0052). What must hold:
a search ranks exactly the candidates it ranked before — the most recent `cap` messages with any term plus the most
recent `cap` with every term — whatever the shares of the terms, ties in time, agents or sessions; and the second
search really starts where the first stopped, or does not run when the first found every match."""

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import TypeAlias

import asyncpg
import pytest

from cairn.indexer import store
from cairn.recall.queries import SEARCH_MESSAGES
from cairn.storage.postgres import tenant_transaction
from cairn.text import build_query
from tests.integration.test_search_keys import plans_of_every_statement
from tests.integration.test_search_suite import _message

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
Admin: TypeAlias = "asyncpg.Connection[asyncpg.Record]"

START = datetime(2026, 11, 2, tzinfo=UTC)
# What a search ranked before 0052: the most recent `cap` matches of each query, found independently (0039's
# matching, which the new arguments leave as it was when not given).
BEFORE = """
SELECT message_id FROM indexer.matching_messages($1, $2::tsquery, $4, $5, $6)
UNION
SELECT message_id FROM indexer.matching_messages($1, $3::tsquery, $4, $5, $6)
"""
MATCHING = "SELECT message_id FROM indexer.matching_messages($1, $2::tsquery, NULL, NULL, $3)"
AFTER = "SELECT message_id FROM indexer.matching_messages($1, $2::tsquery, NULL, NULL, $3, $4, $5)"


def _rows(
    tenant: str, texts: list[str], seconds: list[int], agents: list[str] | None = None
) -> list[tuple[object, ...]]:
    rows = []
    for position, (text, second) in enumerate(zip(texts, seconds, strict=True), 1):
        event = _message(tenant, f"m{position}", text, None, START + timedelta(seconds=second), position)
        if agents is not None:
            event = event.model_copy(update={"agent_id": agents[position - 1]})
        rows.append(store.message_row(event))
    return rows


async def _insert(pool: Pool, tenant: str, rows: list[tuple[object, ...]]) -> None:
    async with tenant_transaction(pool, tenant) as conn:
        await store.insert_messages(conn, rows)


async def _ranked_and_before(
    pool: Pool, tenant: str, query: str, cap: int, agent: str | None = None
) -> tuple[list[asyncpg.Record], set[uuid.UUID]]:
    """Every candidate the search ranks (a limit above them all), and the candidates of the old definition."""
    built = build_query(query)
    assert built is not None
    async with pool.acquire() as conn:
        ranked = await conn.fetch(SEARCH_MESSAGES, uuid.UUID(tenant), built.any_terms, built.all_terms, 100_000, 0,
                                  agent, None, list(built.lexemes), list(built.weights), cap)  # fmt: skip
    async with tenant_transaction(pool, tenant) as conn:
        before = await conn.fetch(BEFORE, uuid.UUID(tenant), built.any_terms, built.all_terms, agent, None, cap)
    return ranked, {r["message_id"] for r in before}


def _mixed_texts(count: int, seed: int) -> list[str]:
    """Messages with both words (most), one of them, or neither: the shape of a Chinese word's bigrams."""
    rng = random.Random(seed)
    choices = ["the walrus ledger balanced", "a walrus alone", "the ledger alone", "nothing here at all"]
    return [rng.choices(choices, weights=(6, 2, 2, 1))[0] + f" {index}" for index in range(count)]


@pytest.mark.parametrize("cap", [1, 7, 40, 150, 400])
async def test_the_search_ranks_the_same_candidates_as_two_independent_searches(app_pool: Pool, cap: int) -> None:
    """300 messages, many sharing a second with others (ties are broken by message id): for every cap, below and
    above the number of matches, the ranked set is exactly the old candidates, every-term messages first."""
    tenant = str(uuid.uuid4())
    texts = _mixed_texts(300, cap)
    await _insert(app_pool, tenant, _rows(tenant, texts, [index // 4 for index in range(300)]))
    ranked, before = await _ranked_and_before(app_pool, tenant, "walrus ledger", cap)
    assert {uuid.UUID(r["message_id"]) for r in ranked} == before
    assert len(before) >= min(cap, 250)
    scores = [r["score"] for r in ranked]
    assert scores == sorted(scores, reverse=True)
    every = [r for r in ranked if r["score"] >= 1.0]
    assert every
    assert all("walrus ledger" in r["text"] for r in every)


async def test_every_term_messages_older_than_all_the_any_term_candidates_are_still_ranked(app_pool: Pool) -> None:
    """The only messages with both words are the oldest: the second search has to reach past the first's window."""
    tenant = str(uuid.uuid4())
    texts = ["walrus ledger together"] * 5 + [f"walrus alone {index}" for index in range(100)]
    await _insert(app_pool, tenant, _rows(tenant, texts, list(range(105))))
    ranked, before = await _ranked_and_before(app_pool, tenant, "walrus ledger", 20)
    assert {uuid.UUID(r["message_id"]) for r in ranked} == before
    assert [r["text"] for r in ranked[:5]] == ["walrus ledger together"] * 5
    assert len(ranked) == 25  # the 20 most recent with a word, the 5 old ones with both


async def test_an_agent_filter_applies_to_both_searches(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    texts = _mixed_texts(200, 3)
    agents = ["main" if index % 3 else "other" for index in range(200)]
    await _insert(app_pool, tenant, _rows(tenant, texts, list(range(200)), agents))
    ranked, before = await _ranked_and_before(app_pool, tenant, "walrus ledger", 30, agent="other")
    assert {uuid.UUID(r["message_id"]) for r in ranked} == before
    async with tenant_transaction(app_pool, tenant) as conn:
        agents_of = await conn.fetch(
            "SELECT DISTINCT agent_id FROM indexer.messages WHERE tenant_id = $1 AND message_id = ANY($2::uuid[])",
            uuid.UUID(tenant), [uuid.UUID(r["message_id"]) for r in ranked],
        )  # fmt: skip
    assert [r["agent_id"] for r in agents_of] == ["other"]


@pytest.mark.parametrize("walk", [True, False], ids=["walked", "keys"])
async def test_matching_after_a_message_returns_the_next_ones_in_the_ranking_order(
    app_pool: Pool, admin: Admin, walk: bool
) -> None:
    """After (occurred_at, message_id): older messages, and those of the same second with a larger id — both ways of
    matching (a term in every message is walked, a rare one read through the keys)."""
    tenant = str(uuid.uuid4())
    texts = [f"walrus {'ledger' if index % 50 == 0 else 'chat'} {index}" for index in range(600)]
    await _insert(app_pool, tenant, _rows(tenant, texts, [index // 5 for index in range(600)]))
    await admin.execute("ANALYZE indexer.messages")
    term = "'walrus'" if walk else "'ledger'"
    async with tenant_transaction(app_pool, tenant) as conn:
        everything = [r["message_id"] for r in await conn.fetch(AFTER, uuid.UUID(tenant), term, 1000, None, None)]
        order = await conn.fetch(
            "SELECT message_id, occurred_at FROM indexer.messages WHERE tenant_id = $1 AND message_id = ANY($2::uuid[])"
            " ORDER BY occurred_at DESC, message_id", uuid.UUID(tenant), everything,
        )  # fmt: skip
        assert [r["message_id"] for r in order] == everything
        for cut in (0, 1, len(order) // 3, len(order) - 2):
            at, after = order[cut]["occurred_at"], order[cut]["message_id"]
            rows = await conn.fetch(AFTER, uuid.UUID(tenant), term, 5, at, after)
            assert [r["message_id"] for r in rows] == everything[cut + 1 : cut + 6]


async def test_the_every_term_search_starts_where_the_any_term_search_stopped(app_pool: Pool, admin: Admin) -> None:
    """Both words in nearly every message (a Chinese word's two bigrams): the second search wants only the few
    every-term messages the first did not hold, and finds them just past its window; with fewer matches than the
    cap it does not run at all."""
    tenant = str(uuid.uuid4())
    texts = [("walrus ledger " if index % 10 else "walrus ") + str(index) for index in range(2000)]
    await _insert(app_pool, tenant, _rows(tenant, texts, list(range(2000))))
    await admin.execute("ANALYZE indexer.messages")
    built = build_query("walrus ledger")
    assert built is not None
    plans = await plans_of_every_statement(admin)
    await admin.execute("SET auto_explain.log_analyze = on")
    for cap, searches in ((100, 2), (3000, 1)):
        plans.clear()
        await admin.fetch(SEARCH_MESSAGES, uuid.UUID(tenant), built.any_terms, built.all_terms, 10, 0, None, None,
                          list(built.lexemes), list(built.weights), cap)  # fmt: skip
        matching = [plan for plan in plans if "LIMIT visits" in plan or "LIMIT wanted" in plan]  # walk or keys
        assert len(matching) == searches, "\n".join(plans)
        if searches == 2:
            # 90 of the 100 most recent have both words: 10 more are wanted, just past the window
            limit = next(line for line in matching[1].splitlines() if line.lstrip().startswith("Limit"))
            assert "rows=10.00 " in limit or "rows=10 " in limit, matching[1]


async def test_a_walk_that_finds_too_few_hands_over_to_the_keys(app_pool: Pool, admin: Admin) -> None:
    """A term common lately and rare before (as a share among recent candidates can suggest, 0052's hint): the walk
    reads at most four times the rows it expects (0054), and the keys find the older matches — the same rows the
    keys alone find."""
    tenant = str(uuid.uuid4())
    texts = [f"routine chat {index}" + (" walrus" if index % 500 == 0 else "") for index in range(2700)]
    texts += [f"walrus chat {index}" for index in range(300)]
    await _insert(app_pool, tenant, _rows(tenant, texts, list(range(3000))))
    await admin.execute("ANALYZE indexer.messages")
    plans = await plans_of_every_statement(admin)
    await admin.execute("SET auto_explain.log_analyze = on")
    await admin.execute("SELECT set_config('cairn.tenant_id', $1, false)", tenant)
    hinted = "SELECT message_id FROM indexer.matching_messages($1, 'walrus', NULL, NULL, 400, NULL, NULL, 'chat', 1.0)"
    walked = [r["message_id"] for r in await admin.fetch(hinted, uuid.UUID(tenant))]
    walk = [plan for plan in plans if "LIMIT visits" in plan]
    keys = [plan for plan in plans if "@@ keyed" in plan and "LIMIT wanted" in plan]
    assert len(walk) == 1, "\n".join(plans)
    assert len(keys) == 1, "\n".join(plans)
    read = next(line for line in walk[0].splitlines() if "Index Scan" in line)
    assert "rows=1600.00 " in read or "rows=1600 " in read, walk[0]  # 4 × 3000 × 400 / 3000
    plans.clear()
    keyed = [r["message_id"] for r in await admin.fetch(MATCHING, uuid.UUID(tenant), "'walrus'", 400)]
    assert not [plan for plan in plans if "LIMIT visits" in plan]
    assert walked == keyed
    assert len(walked) == 306  # 300 recent, 6 older
