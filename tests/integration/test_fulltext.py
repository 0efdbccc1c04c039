"""The application tokenizer against real Postgres full-text search: tsvector literals cast with
`::tsvector`, queries cast with `::tsquery`, as the indexer and recall do. CJK fragments inside longer
runs are found, identifiers whole and in parts, English by stem; documents with every term rank first."""

from typing import TypeAlias

import asyncpg
import pytest

from cairn.text import build_query, message_vector

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"

SHANGHAI = "下周二我去上海参加产品发布会"
TOKYO = "来週東京に行きます"
SEOUL = "다음주에 서울에 갑니다"
LOG = "2026-11-29T09:30:01Z ERROR upstream: read ECONNRESET (ERR_CONN_RESET) from api.example.com"
PLANNING = "We are running the quarterly planning on Thursday"

MATCH = "SELECT $1::tsvector @@ $2::tsquery"


def vector(text: str) -> str:
    return message_vector(text)


def query(text: str, every: bool = True) -> str:
    built = build_query(text)
    assert built is not None, f"nothing searchable in {text!r}"
    return built.all_terms if every else built.any_terms


@pytest.mark.parametrize(
    ("document", "search", "found"),
    [
        (SHANGHAI, "上海", True),
        (SHANGHAI, "发布会", True),
        (SHANGHAI, "上海 发布会", True),
        (SHANGHAI, "海", True),
        (SHANGHAI, "北京", False),
        (SHANGHAI, "海上", False),
        (TOKYO, "東京", True),
        (TOKYO, "京都", False),
        (SEOUL, "서울", True),
        (SEOUL, "부산", False),
        (LOG, "ERR_CONN_RESET", True),
        (LOG, "err_conn_reset", True),
        (LOG, "conn", True),
        (LOG, "reset", True),
        (LOG, "ECONNRESET", True),
        (LOG, "api.example.com", True),
        (LOG, "example", True),
        (LOG, "ERR_CONN_REFUSED", False),
        (LOG, "timeout", False),
        (PLANNING, "run", True),
        (PLANNING, "running", True),
        (PLANNING, "plan", True),
        (PLANNING, "Quarterly Thursday", True),
        (PLANNING, "walking", False),
        (PLANNING, "run spreadsheet", False),
    ],
    ids=[
        "zh-shanghai",
        "zh-launch-event",
        "zh-two-fragments",
        "zh-one-char",
        "zh-beijing-absent",
        "zh-reversed-absent",
        "ja-tokyo",
        "ja-kyoto-absent",
        "ko-seoul",
        "ko-busan-absent",
        "identifier-whole",
        "identifier-lowercase",
        "identifier-part-conn",
        "identifier-part-reset",
        "word-econnreset",
        "host",
        "host-part",
        "other-identifier-absent",
        "timeout-absent",
        "stem-run",
        "exact-running",
        "stem-plan",
        "two-words",
        "walking-absent",
        "one-word-absent",
    ],
)
async def test_match(app_pool: Pool, document: str, search: str, found: bool) -> None:
    async with app_pool.acquire() as conn:
        assert await conn.fetchval(MATCH, vector(document), query(search)) is found


async def test_a_host_is_found_inside_a_url(app_pool: Pool) -> None:
    async with app_pool.acquire() as conn:
        assert await conn.fetchval(MATCH, vector("GET https://api.example.com/v1/users"), query("api.example.com"))


async def test_the_or_query_finds_partial_matches(app_pool: Pool) -> None:
    async with app_pool.acquire() as conn:
        assert await conn.fetchval(MATCH, vector(SHANGHAI), query("上海 北京")) is False
        assert await conn.fetchval(MATCH, vector(SHANGHAI), query("上海 北京", every=False)) is True
        assert await conn.fetchval(MATCH, vector(PLANNING), query("run spreadsheet", every=False)) is True


RANKED = """
SELECT id FROM unnest($1::text[], $2::text[]) AS docs(id, terms), CAST($3 AS tsquery) AS any_q
WHERE terms::tsvector @@ any_q
ORDER BY ts_rank_cd(terms::tsvector, any_q) DESC, id
"""


@pytest.mark.parametrize(
    ("search", "documents", "order"),
    [
        (
            "上海 发布会",
            {
                "some": "我下周去上海",
                "every": SHANGHAI,
                "none": "我在北京工作",
            },
            ["every", "some"],
        ),
        (
            "launch slides Shanghai",
            {
                "one": "the weather in Shanghai is mild",
                "every": "I will bring the slides for the Shanghai launch",
                "two": "the launch slides are not ready",
                "none": "lunch at noon",
            },
            ["every", "two", "one"],
        ),
    ],
    ids=["chinese", "english"],
)
async def test_a_message_with_every_term_ranks_above_one_with_some(
    app_pool: Pool, search: str, documents: dict[str, str], order: list[str]
) -> None:
    ids = list(documents)
    vectors = [vector(documents[i]) for i in ids]
    async with app_pool.acquire() as conn:
        ranked = [r["id"] for r in await conn.fetch(RANKED, ids, vectors, query(search, every=False))]
    assert ranked == order
