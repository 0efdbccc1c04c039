"""A page of every-term messages scores only them (migration 0068). What must hold: every search answers exactly
what 0053's ranking answered — the same messages, the same scores, the same order, for any page, cap, agent and
weights — and when the page is the every-term candidates', the candidates without every term are not scored; the
ranking statement is planned once, not for each call's arguments."""

import json
import random
import re
import uuid
from datetime import UTC, datetime, timedelta
from itertools import product
from pathlib import Path
from typing import Any, TypeAlias

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

START = datetime(2026, 11, 3, tzinfo=UTC)
WORDS = ["walrus", "ledger", "harbor", "quartz", "蓝莓", "freight", "ERR_CONN_RESET"]
OLD = SEARCH_MESSAGES.replace("indexer.search_messages(", "indexer.search_messages_0053(")
# Definitions that later ones replaced, kept as references for tests that compare answers.
REFERENCE_SQL = Path(__file__).with_name("reference_sql")


def _old_ranking() -> str:
    """0053's search_messages, the definition before 0068, under another name."""
    return (REFERENCE_SQL / "search_messages_0053.sql").read_text()


def _texts(count: int, seed: int) -> list[str]:
    """One to four of the words (a word may come twice: tf 2), with filler, so a query's words come together in some
    messages and alone in others."""
    rng = random.Random(seed)
    texts = []
    for index in range(count):
        words = rng.choices(WORDS, weights=(8, 5, 4, 2, 3, 2, 2), k=rng.randint(1, 4))
        filler = " ".join(rng.choice(["a", "long", "note", "about", "the", "day"]) for _ in range(rng.randint(0, 12)))
        texts.append(f"{' '.join(words)} {filler} {index}")
    return texts


async def _insert(pool: Pool, tenant: str, texts: list[str], agents: list[str]) -> None:
    rows = []
    for position, text in enumerate(texts, 1):
        event = _message(tenant, f"m{position}", text, None, START + timedelta(seconds=position // 3), position)
        rows.append(store.message_row(event.model_copy(update={"agent_id": agents[position - 1]})))
    async with tenant_transaction(pool, tenant) as conn:
        await store.insert_messages(conn, rows)


async def test_every_page_is_ranked_as_0053_ranked_it(app_pool: Pool, admin: Admin) -> None:
    """500 messages, three to a second (ties broken by id): for queries of one to three words, pages before, across
    and past the every-term candidates, small and large caps, one agent or all, and weights for which only scoring
    everything is known to be right (zero, negative, huge), 0068 and 0053 return the same rows and scores."""
    tenant = str(uuid.uuid4())
    texts = _texts(500, 5)
    await _insert(app_pool, tenant, texts, ["main" if index % 4 else "other" for index in range(500)])
    queries = ["walrus ledger", "walrus ERR_CONN_RESET", "harbor quartz", "蓝莓 freight", "walrus",
               "ledger harbor quartz"]  # fmt: skip
    pages = [(10, 0), (1, 0), (3, 7), (25, 40), (100, 0), (60, 150), (1000, 0), (0, 0)]
    shapes = product(queries, range(4), (15, 1000), (None, "other"), pages)  # range(4): the weightings below
    compared = every_term_pages = 0
    transaction = admin.transaction()
    await transaction.start()
    try:
        await admin.execute(_old_ranking())
        for query, weighting, cap, agent, (limit, offset) in shapes:
            built = build_query(query)
            assert built is not None
            lexemes, weights = list(built.lexemes), list(built.weights)
            weights = [weights, [0.0, *weights[1:]], [-0.3] * len(weights), [5e3] * len(weights)][weighting]
            args = (uuid.UUID(tenant), built.any_terms, built.all_terms, limit, offset, agent, None, lexemes, weights,
                    cap)  # fmt: skip
            new = [(r["message_id"], r["score"]) for r in await admin.fetch(SEARCH_MESSAGES, *args)]
            old = [(r["message_id"], r["score"]) for r in await admin.fetch(OLD, *args)]
            assert new == old, (query, weights, cap, agent, limit, offset)
            compared += 1
            every_term_pages += bool(new) and all(score >= 1.0 for _, score in new)
    finally:
        await transaction.rollback()  # the old function goes with it
    assert compared == 6 * 4 * 2 * 2 * 8
    assert every_term_pages > 100  # the every-term path ran, and not only for empty pages


def _nodes(plan: Any) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found += _nodes(child)
    return found


async def _unnested_positions(admin: Admin, plans: list[str], args: tuple[object, ...]) -> int:
    """How many (candidate, asked lexeme) rows the ranking unnested with their positions (the scored ones)."""
    plans.clear()
    await admin.fetch(SEARCH_MESSAGES, *args)
    rows = 0
    for message in plans:
        if "{" not in message:
            continue
        for node in _nodes(json.loads(message[message.index("{") :])["Plan"]):
            outputs = " ".join(node.get("Output", []))
            if node["Node Type"] == "ProjectSet" and re.search(r"unnest\(c(_\d+)?\.asked\)", outputs):
                rows += int(node["Actual Rows"])
    return rows


async def test_only_the_every_term_candidates_are_scored_when_the_page_is_theirs(app_pool: Pool, admin: Admin) -> None:
    """40 messages with both words and 160 with one: a page of 10 is every-term messages only, and only their
    lexemes are unnested with positions; a page of 50 reaches past them, and every candidate is scored."""
    tenant = str(uuid.uuid4())
    texts = [f"walrus ledger {index}" for index in range(40)] + [f"walrus alone {index}" for index in range(160)]
    random.Random(2).shuffle(texts)
    await _insert(app_pool, tenant, texts, ["main"] * 200)
    built = build_query("walrus ledger")
    assert built is not None
    plans = await plans_of_every_statement(admin)
    for setting in ("log_analyze = on", "log_verbose = on", "log_format = json", "log_timing = off"):
        await admin.execute(f"SET auto_explain.{setting}")

    def args(limit: int) -> tuple[object, ...]:
        return (uuid.UUID(tenant), built.any_terms, built.all_terms, limit, 0, None, None, list(built.lexemes),
                list(built.weights), 1000)  # fmt: skip

    async with tenant_transaction(app_pool, tenant) as conn:
        asked = "length(ts_filter(setweight(terms, 'A', $2), '{a}'))"
        every = await conn.fetchval(f"SELECT sum({asked}) FROM indexer.messages WHERE terms @@ $1::tsquery",
                                    built.all_terms, list(built.lexemes))  # fmt: skip
        everyone = await conn.fetchval(f"SELECT sum({asked}) FROM indexer.messages WHERE terms @@ $1::tsquery",
                                       built.any_terms, list(built.lexemes))  # fmt: skip
    assert 0 < every < everyone
    assert await _unnested_positions(admin, plans, args(10)) == every
    assert await _unnested_positions(admin, plans, args(50)) == everyone
    # planned once per connection (0133): the ranking's plan takes the asked lexemes as a parameter, not the
    # values of one call (0070 planned it for its arguments on every call, and its plan held '{walrus,...}')
    ranking = [plan for plan in plans if "setweight(s.terms" in plan]
    assert ranking, "\n".join(plans)
    assert all("'{walrus" not in plan and "$8" in plan for plan in ranking), ranking
