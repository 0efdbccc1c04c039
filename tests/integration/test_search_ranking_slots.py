"""Session search ranks one row per candidate (migration 0149). What must hold: every search answers exactly what
0070's ranking answered (the same messages, scores and order) for any page, cap, agent and weighting, with words
that come twice in a message, identifiers split into parts, CJK, more asked lexemes than slots (0070's statement
ranks) and a missing weight; and a query of at most 8 asked lexemes is ranked without unnesting any candidate's
lexemes with their positions, except to count those of a lexeme that comes twice in it. Only a tenant of at least
3,000 messages (message_counts) is ranked so: a smaller one runs 0070's statement, as its fixed cost does not pay."""

import json
import random
import re
import uuid
from datetime import timedelta
from itertools import product
from typing import Any, TypeAlias

import asyncpg
import pytest

from cairn.indexer import store
from cairn.recall.queries import SEARCH_MESSAGES
from cairn.storage.postgres import tenant_transaction
from cairn.text import build_query
from tests.integration.test_search_every_term_page import REFERENCE_SQL, START, _insert
from tests.integration.test_search_keys import plans_of_every_statement
from tests.integration.test_search_suite import _message

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
Admin: TypeAlias = "asyncpg.Connection[asyncpg.Record]"

WORDS = ["walrus", "ledger", "harbor", "蓝莓", "ERR_CONN_RESET", "config.yaml", "running"]
OLD = SEARCH_MESSAGES.replace("indexer.search_messages(", "indexer.search_messages_0070(")
SLOTS_FROM = 3000  # messages of a tenant, 0149's threshold for the slots


def _filler(count: int) -> list[str]:
    """Messages with none of the asked words, to bring a tenant up to the slots' threshold."""
    return [f"a long note about the day {index}" for index in range(count)]


def _ranking_0070() -> str:
    """0070's search_messages (the ranking before 0149; 0133 only planned it once), under another name."""
    return (REFERENCE_SQL / "search_messages_0070.sql").read_text()


def _texts(count: int, seed: int) -> list[str]:
    """One to five of the words, a word up to three times (tf 1 to 3), with filler."""
    rng = random.Random(seed)
    texts = []
    for index in range(count):
        words = rng.choices(WORDS, weights=(8, 5, 4, 3, 3, 2, 2), k=rng.randint(1, 5))
        filler = " ".join(rng.choice(["a", "long", "note", "about", "the", "day"]) for _ in range(rng.randint(0, 12)))
        texts.append(f"{' '.join(words)} {filler} {index}")
    return texts


async def test_every_page_is_ranked_as_0070_ranked_it(app_pool: Pool, admin: Admin) -> None:
    """600 messages (and 2,400 with none of the words, the tenant at the threshold): queries of one to four words
    (2 to 11 asked lexemes), pages before, across and past the every-term candidates, two caps, one agent or all, and
    four weightings (the query's, a zero, all negative, one weight missing): 0149 and 0070 return the same rows and
    the same scores, to the bit."""
    tenant = str(uuid.uuid4())
    agents = ["main" if index % 4 else "other" for index in range(600)] + ["filler"] * (SLOTS_FROM - 600)
    await _insert(app_pool, tenant, _texts(600, 11) + _filler(SLOTS_FROM - 600), agents)
    queries = ["walrus ledger", "walrus ERR_CONN_RESET", "config.yaml ERR_CONN_RESET", "蓝莓 harbor", "running",
               "walrus ledger harbor", "ERR_CONN_RESET config.yaml running walrus"]  # fmt: skip
    pages = [(10, 0), (3, 7), (25, 40), (100, 0), (1000, 0)]
    compared = slotted = 0
    transaction = admin.transaction()
    await transaction.start()
    try:
        await admin.execute(_ranking_0070())
        for query, weighting, cap, agent, (limit, offset) in product(queries, range(4), (20, 1000), (None, "other"),
                                                                     pages):  # fmt: skip
            built = build_query(query)
            assert built is not None
            lexemes, weights = list(built.lexemes), list(built.weights)
            weights = [weights, [0.0, *weights[1:]], [-0.3] * len(weights), weights[:-1]][weighting]
            args = (uuid.UUID(tenant), built.any_terms, built.all_terms, limit, offset, agent, None, lexemes, weights,
                    cap)  # fmt: skip
            new = [(r["message_id"], r["score"]) for r in await admin.fetch(SEARCH_MESSAGES, *args)]
            old = [(r["message_id"], r["score"]) for r in await admin.fetch(OLD, *args)]
            assert new == old, (query, weights, cap, agent, limit, offset)
            compared += 1
            slotted += len(set(lexemes)) <= 8 and weighting < 3 and bool(new)
    finally:
        await transaction.rollback()  # the old function goes with it
    assert compared == 7 * 4 * 2 * 2 * 5
    assert slotted > 300


def _nodes(plan: Any) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found += _nodes(child)
    return found


async def _unnested(admin: Admin, plans: list[str], args: tuple[object, ...]) -> tuple[int, int]:
    """(candidate, asked lexeme) rows unnested with their positions by 0070's statement, and the candidates' lexemes
    whose positions 0149 counted."""
    plans.clear()
    await admin.fetch(SEARCH_MESSAGES, *args)
    rows = counted = 0
    for message in plans:
        if "{" not in message:
            continue
        for node in _nodes(json.loads(message[message.index("{") :])["Plan"]):
            outputs = " ".join(node.get("Output", []))
            if node["Node Type"] == "ProjectSet" and re.search(r"unnest\(c(_\d+)?\.asked\)", outputs):
                rows += int(node["Actual Rows"])
            if node["Node Type"] == "Function Scan" and re.fullmatch(r"u(_\d+)?", node.get("Alias", "")):
                counted += int(node["Actual Loops"])
    return rows, counted


def _walrus_ledger() -> list[str]:
    """200 messages with 'walrus ledger', 60 of them with 'walrus' twice."""
    texts = [f"walrus ledger {'walrus ' if index % 10 < 3 else ''}note {index}" for index in range(200)]
    random.Random(3).shuffle(texts)
    return texts


async def _explained(admin: Admin) -> list[str]:
    plans = await plans_of_every_statement(admin)
    for setting in ("log_analyze = on", "log_verbose = on", "log_format = json", "log_timing = off"):
        await admin.execute(f"SET auto_explain.{setting}")
    return plans


async def test_the_slots_rank_without_unnesting_positions(app_pool: Pool, admin: Admin) -> None:
    """200 messages with 'walrus ledger', 60 of them with 'walrus' twice, in a tenant of 3,000: the 200 are ranked
    without a row per lexeme, and positions are counted only in the 60, for each of their two slots."""
    tenant = str(uuid.uuid4())
    await _insert(app_pool, tenant, _walrus_ledger() + _filler(SLOTS_FROM - 200), ["main"] * SLOTS_FROM)
    built = build_query("walrus ledger")
    assert built is not None
    plans = await _explained(admin)
    args = (uuid.UUID(tenant), built.any_terms, built.all_terms, 10, 0, None, None, list(built.lexemes),
            list(built.weights), 1000)  # fmt: skip
    assert await _unnested(admin, plans, args) == (0, 120)
    # nine asked lexemes are more than the slots: 0070's statement ranks, one row per candidate and asked lexeme
    many = build_query("walrus ledger ERR_CONN_RESET config.yaml")
    assert many is not None
    assert len(set(many.lexemes)) == 9
    args = (uuid.UUID(tenant), many.any_terms, many.all_terms, 10, 0, None, None, list(many.lexemes),
            list(many.weights), 1000)  # fmt: skip
    assert await _unnested(admin, plans, args) == (400, 0)


async def test_a_tenant_under_the_threshold_is_ranked_by_0070s_statement(app_pool: Pool, admin: Admin) -> None:
    """The same 200 'walrus ledger' messages in a tenant of 2,999: 0070's statement ranks them, one row per
    candidate and asked lexeme, no position counted. The 3,000th message (none of the words) and the slots rank
    them."""
    tenant = str(uuid.uuid4())
    texts = _walrus_ledger() + _filler(SLOTS_FROM - 200)
    await _insert(app_pool, tenant, texts[:-1], ["main"] * (SLOTS_FROM - 1))
    built = build_query("walrus ledger")
    assert built is not None
    plans = await _explained(admin)
    args = (uuid.UUID(tenant), built.any_terms, built.all_terms, 10, 0, None, None, list(built.lexemes),
            list(built.weights), 1000)  # fmt: skip
    assert await _unnested(admin, plans, args) == (400, 0)
    last = _message(tenant, f"m{SLOTS_FROM}", texts[-1], None, START + timedelta(seconds=SLOTS_FROM // 3), SLOTS_FROM)
    async with tenant_transaction(app_pool, tenant) as conn:
        await store.insert_messages(conn, [store.message_row(last)])
    assert await _unnested(admin, plans, args) == (0, 120)
