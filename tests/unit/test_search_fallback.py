"""The phrase fallback of `POST /v1/sessions/search` in statements: a search with hits is one statement, and a
first page that comes back empty is not asked again whether anything matches (tests/integration/
test_search_suite.py checks on Postgres that an empty first page means the probe finds nothing either)."""

from datetime import UTC, datetime

from cairn.recall.api import _ranked
from cairn.recall.queries import MessageHit, Page, Scope
from cairn.text import SearchQuery, build_query

TENANT = "00000000-0000-0000-0000-000000000001"
HIT = MessageHit("agent:main:main", "s", "m", "user", datetime(2026, 1, 1, tzinfo=UTC), "new parents", 0.5, None)


class Store:
    """Answers by the all-terms query (every page alike, as in `found`), and records each statement."""

    def __init__(self, found: dict[str, list[MessageHit]], first_page_only: bool = False) -> None:
        self.found, self.first_page_only = found, first_page_only
        self.asked: list[tuple[str, int, int]] = []

    async def search_messages(self, tenant: str, scope: Scope, query: SearchQuery, page: Page) -> list[MessageHit]:
        self.asked.append((query.all_terms, page.limit, page.offset))
        if self.first_page_only and page.offset > 0:
            return []
        return self.found.get(query.all_terms, [])


def _built(text: str) -> SearchQuery:
    built = build_query(text)
    assert built is not None
    return built


async def _run(store: Store, text: str, offset: int = 0) -> tuple[SearchQuery, list[MessageHit]]:
    return await _ranked(store, TENANT, Scope(None, None), text, _built(text), Page(10, offset, 1000))  # type: ignore[arg-type]


async def test_a_search_with_hits_is_one_statement() -> None:
    store = Store({_built("new parents").all_terms: [HIT]})
    query, rows = await _run(store, "new parents")
    assert (query.all_terms, rows, len(store.asked)) == (_built("new parents").all_terms, [HIT], 1)


async def test_a_phrase_with_no_hit_on_the_first_page_falls_back_in_two_statements() -> None:
    store = Store({_built("new parents group").all_terms: [HIT]})
    query, rows = await _run(store, '"new parents group"')
    assert (query, rows) == (_built("new parents group"), [HIT])
    strict = _built('"new parents group"').all_terms
    assert store.asked == [(strict, 10, 0), (query.all_terms, 10, 0)]  # no (strict, 1, 0) probe in between


async def test_a_later_page_still_asks_whether_the_phrase_matches_at_all() -> None:
    strict = _built('"new parents group"').all_terms
    store = Store({strict: [HIT]}, first_page_only=True)  # the phrase matches, this page is past its hits
    query, rows = await _run(store, '"new parents group"', offset=25)
    assert (query.all_terms, rows) == (strict, [])
    assert store.asked == [(strict, 10, 25), (strict, 1, 0)]

    loose = _built("new parents group").all_terms
    store = Store({loose: [HIT]})  # the phrase matches nothing: the words, on the same page
    query, rows = await _run(store, '"new parents group"', offset=25)
    assert (query.all_terms, rows) == (loose, [HIT])
    assert store.asked == [(strict, 10, 25), (strict, 1, 0), (loose, 10, 25)]


async def test_a_query_without_phrases_is_not_asked_twice() -> None:
    store = Store({})
    _, rows = await _run(store, "nothing here")
    assert (rows, len(store.asked)) == ([], 1)
