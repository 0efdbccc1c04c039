"""The full-text index holds tenant-qualified keys (migration 0039): each lexeme prefixed by eight hex digits of
md5(tenant), an index on an expression of the row, so every writer fills it. What it must never do: lose a row
that the row's own terms match (any query shape, any lexeme), or let a tenant see another's rows when their
prefixes are the same; and the search must really read it."""

import hashlib
import uuid
from datetime import UTC, datetime, timedelta
from typing import TypeAlias

import asyncpg
import pytest

from cairn.cli.bench_load import COPY_INDEX_ROWS
from cairn.indexer import store
from cairn.recall.queries import SEARCH_MESSAGES, Page, ReadStore, Scope
from cairn.storage.postgres import tenant_transaction
from cairn.text import build_query
from tests.integration.test_search_suite import _index, _message
from tests.search_cases import CASES

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
Admin: TypeAlias = "asyncpg.Connection[asyncpg.Record]"

# Rows the tenant's terms match that its keys would not find (must be none), and rows its terms match.
LOST = """
SELECT count(*) FILTER (
           WHERE terms @@ $2::tsquery
             AND NOT indexer.tenant_terms(tenant_id, terms) @@ indexer.tenant_terms_query($1, $2::tsquery)),
       count(*) FILTER (WHERE terms @@ $2::tsquery)
FROM indexer.messages WHERE tenant_id = $1
"""
MATCHES = "SELECT message_id FROM indexer.matching_messages($1, $2::tsquery, NULL, NULL, 100) ORDER BY message_id"
INSERT_TERMS = """
INSERT INTO indexer.messages (tenant_id, agent_id, message_id, session_key, session_id, position, reset_index, role,
    chat_type, text, terms, occurred_at)
VALUES ($1, 'main', $2, 'agent:main:main', $2, 1, 0, 'user', 'direct', 'crafted', $3::tsvector, now())
"""


async def _lost(conn: "asyncpg.pool.PoolConnectionProxy[asyncpg.Record]", tenant: str, query: str) -> tuple[int, int]:
    row = await conn.fetchrow(LOST, uuid.UUID(tenant), query)
    assert row is not None
    return int(row[0]), int(row[1])


@pytest.fixture(scope="module")
async def suite_tenant(app_pool: Pool) -> str:
    from tests.search_cases import CORPUS

    tenant = str(uuid.uuid4())
    await _index(app_pool, tenant, CORPUS)
    return tenant


async def test_the_keys_find_every_row_the_terms_match_for_every_suite_query(app_pool: Pool, suite_tenant: str) -> None:
    """Phrases, identifiers (whole or in parts), CJK bigrams, stems: the keyed query is implied by the real one."""
    checked = 0
    async with tenant_transaction(app_pool, suite_tenant) as conn:
        for case in CASES:
            built = build_query(case.query)
            assert built is not None
            for query in (built.all_terms, built.any_terms):
                lost, matched = await _lost(conn, suite_tenant, query)
                assert lost == 0, f"{case.id}: the keys of {query!r} miss {lost} of {matched} rows"
                checked += matched
    assert checked > len(CASES)  # the queries did match rows


@pytest.mark.parametrize(
    ("terms", "query"),
    [
        ("'it''s':1 'fine':2", "'it''s' <-> 'fine'"),
        ("'back\\\\slash':1", "'back\\\\slash'"),
        ("'quote''and\\\\back':1", "'quote''and\\\\back'"),
        ("'prefixed':1", "'prefix':*"),
        ("'weighted':1A", "'weighted':A"),
        ("'one':1 'two':5", "'one' <4> 'two'"),
        ("'上海':1 '海参':2", "'上海' <-> '海参'"),
        ("'" + "x" * 2000 + "':1 'y':2", "'" + "x" * 2000 + "' & 'y'"),
    ],
    ids=["apostrophe", "backslash", "both", "prefix", "weight", "distance", "cjk", "long-lexeme"],
)
async def test_awkward_lexemes_are_keyed_the_same_in_rows_and_queries(app_pool: Pool, terms: str, query: str) -> None:
    tenant = str(uuid.uuid4())
    message = uuid.uuid4()
    async with tenant_transaction(app_pool, tenant) as conn:
        await conn.execute(INSERT_TERMS, uuid.UUID(tenant), message, terms)
        assert await _lost(conn, tenant, query) == (0, 1)
        assert [r["message_id"] for r in await conn.fetch(MATCHES, uuid.UUID(tenant), query)] == [message]


async def test_a_query_with_not_is_refused_rather_than_answered_wrongly(app_pool: Pool) -> None:
    """A phrase keyed as `&` is implied by the phrase, but not under NOT; the tokenizer never writes NOT."""
    tenant = str(uuid.uuid4())
    async with tenant_transaction(app_pool, tenant) as conn:
        with pytest.raises(asyncpg.RaiseError, match="NOT is not supported"):
            await conn.fetch(MATCHES, uuid.UUID(tenant), "'a' & !('b' <-> 'c')")


def _tenants_with_one_prefix() -> tuple[str, str]:
    """Two tenants whose key prefixes (eight hex digits of md5) are equal: a birthday search, ~80k tries."""
    seen: dict[str, str] = {}
    while True:
        tenant = str(uuid.uuid4())
        prefix = hashlib.md5(tenant.encode()).hexdigest()[:8]
        if prefix in seen:
            return seen[prefix], tenant
        seen[prefix] = tenant


async def test_tenants_sharing_a_key_prefix_never_see_each_others_rows(app_pool: Pool, admin: Admin) -> None:
    first, second = _tenants_with_one_prefix()
    prefixes = await admin.fetchval(
        "SELECT count(DISTINCT left(md5(t::text), 8)) FROM unnest($1::uuid[]) t", [first, second]
    )
    assert prefixes == 1  # the database keys both tenants alike: their rows share posting lists
    await _index(app_pool, first, {"mine": ("the walrus ledger is due", None)})
    await _index(app_pool, second, {"theirs": ("walrus ledger for the other tenant", None), "more": ("walrus", None)})
    built = build_query("walrus ledger")
    assert built is not None
    for tenant, expected in ((first, ["mine"]), (second, ["theirs", "more"])):
        hits = await ReadStore(app_pool).search_messages(tenant, Scope(None, None), built, Page(25, 0, 1000))
        assert [hit.external_id for hit in hits] == expected


async def test_rows_of_every_writer_are_found_through_the_keys(app_pool: Pool, admin: Admin) -> None:
    """The indexer's insert, the bench's copy of rows and a rewrite of a row's terms: no writer fills the keys
    itself, so none can forget to."""
    tenant = str(uuid.uuid4())
    event = _message(tenant, "indexed", "the narwhal manifest", None, datetime(2026, 11, 2, tzinfo=UTC), 1)
    async with tenant_transaction(app_pool, tenant) as conn:
        await store.insert_messages(conn, [store.message_row(event)])
    await admin.execute(COPY_INDEX_ROWS, [uuid.UUID(tenant)], 1, "#copy", 10)
    async with tenant_transaction(app_pool, tenant) as conn:
        assert len(await conn.fetch(MATCHES, uuid.UUID(tenant), "'narwhal'")) == 2
        await conn.execute(
            "UPDATE indexer.messages SET terms = terms || 'reindexed'::tsvector WHERE external_id = 'indexed'"
        )
        matched = await conn.fetch(MATCHES, uuid.UUID(tenant), "'narwhal' & 'reindexed'")
        assert [r["message_id"] for r in matched] == [uuid.UUID(event.message_id)]


async def test_the_search_reads_the_tenant_keys_index(app_pool: Pool, admin: Admin) -> None:
    """The matching function's condition is the index's expression (a change to either side alone would make
    every search a scan of the tenant): in a tenant of 3,000 messages, two of them with the term, the plans of
    a search (as auto_explain reports them) read the index."""
    tenant = str(uuid.uuid4())
    rows = [_row(tenant, index, f"routine chat number {index}") for index in range(1, 3001)]
    rows += [_row(tenant, 3001 + index, f"the zeppelin tour {index}") for index in range(2)]
    async with tenant_transaction(app_pool, tenant) as conn:
        await store.insert_messages(conn, rows)
    await admin.execute("ANALYZE indexer.messages")
    built = build_query("zeppelin")
    assert built is not None
    plans = await plans_of_every_statement(admin)
    hits = await admin.fetch(SEARCH_MESSAGES, uuid.UUID(tenant), built.any_terms, built.all_terms, 5, 0, None, None,
                             list(built.lexemes), list(built.weights), 1000)  # fmt: skip
    assert len(hits) == 2
    walked = [plan for plan in plans if "ORDER BY m.occurred_at" in plan and "@@ keyed" not in plan]
    assert not walked, "\n".join(walked)
    matching = [plan for plan in plans if "@@ keyed" in plan]
    assert matching, "\n".join(plans)
    assert all("messages_tenant_terms" in plan for plan in matching), "\n".join(matching)


async def plans_of_every_statement(admin: Admin) -> list[str]:
    """The plans auto_explain reports from now on for this connection, nested statements included."""
    plans: list[str] = []
    admin.add_log_listener(lambda _conn, message: plans.append(str(message.message)))
    await admin.execute("LOAD 'auto_explain'")
    for setting in ("log_min_duration = 0", "log_nested_statements = on"):
        await admin.execute(f"SET auto_explain.{setting}")
    await admin.execute("SET client_min_messages = log")
    return plans


def _row(tenant: str, position: int, text: str) -> tuple[object, ...]:
    at = datetime(2026, 11, 2, tzinfo=UTC) + timedelta(seconds=position)
    return store.message_row(_message(tenant, f"m{position}", text, None, at, position))


async def test_a_term_in_most_of_the_tenants_messages_is_found_walking_back_from_the_newest(
    app_pool: Pool, admin: Admin
) -> None:
    """Matches everywhere: the most recent `cap` of them are found from the newest messages (the keys would fetch all
    3,000), and they are the same rows the keys find."""
    tenant = str(uuid.uuid4())
    rows = [_row(tenant, index, f"routine chat number {index}") for index in range(1, 3001)]
    async with tenant_transaction(app_pool, tenant) as conn:
        await store.insert_messages(conn, rows)
    await admin.execute("ANALYZE indexer.messages")
    plans = await plans_of_every_statement(admin)
    await admin.execute("SELECT set_config('cairn.tenant_id', $1, false)", tenant)
    walked = await admin.fetch(MATCHES, uuid.UUID(tenant), "'routine'")
    assert any("messages_tenant_recent" in plan and "@@ keyed" not in plan for plan in plans), "\n".join(plans)
    assert [r["message_id"] for r in walked] == sorted(uuid.UUID(str(row[2])) for row in rows[-100:])


async def test_a_cjk_character_that_starts_a_bigram_has_no_key_of_its_own_and_is_still_found(
    app_pool: Pool, admin: Admin
) -> None:
    """0142: the bigram's key holds the row, and a one-character query asks the tenant's keys by prefix. Every
    character of the messages is found alone, in Chinese, Japanese and Korean, and in a phrase."""
    tenant = str(uuid.uuid4())
    texts = {1: "下周我去上海参加发布会", 2: "会", 3: "来週東京でラーメン", 4: "다음주에 서울에 갑니다"}
    rows = [_row(tenant, position, text) for position, text in texts.items()]
    async with tenant_transaction(app_pool, tenant) as conn:
        await store.insert_messages(conn, rows)
    prefix = hashlib.md5(tenant.encode()).hexdigest()[:8]
    keys = await admin.fetch(
        """SELECT m.text, tsvector_to_array(indexer.tenant_terms(m.tenant_id, m.terms)) AS keys
           FROM indexer.messages m WHERE m.tenant_id = $1""",
        uuid.UUID(tenant),
    )
    by_text = {row["text"]: [key.removeprefix(prefix) for key in row["keys"]] for row in keys}
    # 10 bigrams and the last character's unigram (it starts no bigram), not 21 keys
    assert sorted(by_text[texts[1]]) == sorted([*map(str.__add__, texts[1], texts[1][1:]), "会"])
    assert by_text[texts[2]] == ["会"]
    # 다 ends a run but starts 다음
    assert sorted(by_text[texts[4]]) == sorted(["다음", "음주", "주에", "에", "서울", "울에", "갑니", "니다"])
    ids = {str(row[2]): position for position, row in zip(texts, rows, strict=True)}
    async with tenant_transaction(app_pool, tenant) as conn:
        for text in texts.values():
            for character in set(text) - {" "}:
                built = build_query(character)
                assert built is not None
                matched = await conn.fetch(MATCHES, uuid.UUID(tenant), built.all_terms)
                found = {ids[str(r["message_id"])] for r in matched}
                expected = {other for other, words in texts.items() if character in words}
                assert found == expected, (character, found)
                assert await _lost(conn, tenant, built.all_terms) == (0, len(expected))
        for phrase, position in (('"去 上海"', 1), ('"ラ"', 3), ('"서 울"', 4)):
            built = build_query(phrase)
            assert built is not None
            matched = await conn.fetch(MATCHES, uuid.UUID(tenant), built.all_terms)
            assert {ids[str(r["message_id"])] for r in matched} == {position}, phrase
