"""Session search end to end through HTTP: a slice of the search suite (tests/search_cases.py) on
messages ingested through the public API, and the request/response contract of
`POST /v1/sessions/search` (limits as problem+json, default and maximum `limit`, paging, snippets, the
32 KiB response cap)."""

from collections.abc import Iterator
from typing import Any

import pytest

from cairn.local import LocalStack
from tests.conftest import Tenant
from tests.search_cases import CORPUS, E2E_CASES, Case

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def corpus(services: LocalStack) -> Iterator[tuple[Tenant, str]]:
    """One tenant holding the suite's corpus, and the position of its last write."""
    tenant = Tenant(services)
    messages = [
        {"text": text, "sender_name": sender, "message_id": key, "channel": "suite"}
        for key, (text, sender) in CORPUS.items()
    ]
    response = tenant.ingest.post("/v1/messages/batch", json={"messages": messages})
    assert response.status_code == 202, response.text
    yield tenant, response.json()["results"][-1]["position"]
    tenant.close()


def _search(tenant: Tenant, position: str, **body: Any) -> dict[str, Any]:
    response = tenant.recall.post("/v1/sessions/search", json={"consistent_with": position, **body})
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    assert found["indexing"] is False
    return found


@pytest.mark.parametrize("case", E2E_CASES, ids=[case.id for case in E2E_CASES])
def test_search_case(corpus: tuple[Tenant, str], case: Case) -> None:
    tenant, position = corpus
    hits = _search(tenant, position, query=case.query, limit=25)["results"]
    keys = [hit["external_id"] for hit in hits]
    assert case.found in keys, f"{case.query!r} did not find {case.found}: {keys}"
    assert case.not_found not in keys, f"{case.query!r} found {case.not_found}: {keys}"
    hit = hits[keys.index(case.found)]
    assert hit["session_key"] == "agent:main:main"
    assert hit["role"] == "user"
    assert hit["snippet"] == CORPUS[case.found][0]  # short texts come back whole


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "x" * 4097}, "query"),
        ({"query": "x", "limit": 26}, "limit"),
        ({"query": "x", "limit": 0}, "limit"),
        ({"query": "x", "offset": -1}, "offset"),
        ({"query": "x", "visibility": "everyone"}, "visibility"),
    ],
    ids=["empty-query", "query-over-4096", "limit-over-25", "limit-zero", "negative-offset", "unknown-visibility"],
)
def test_invalid_searches_are_problems_naming_the_field(tenant: Tenant, body: dict[str, Any], field: str) -> None:
    response = tenant.recall.post("/v1/sessions/search", json=body)
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["status"] == 422
    assert field in [error["field"] for error in problem["errors"]]


def test_limit_defaults_to_10_and_pages_with_offset(tenant: Tenant) -> None:
    batch = [{"text": f"weekly sync note {index}", "message_id": f"w{index}"} for index in range(30)]
    position = tenant.ingest.post("/v1/messages/batch", json={"messages": batch}).json()["results"][-1]["position"]
    assert len(_search(tenant, position, query="x" * 4096)["results"]) == 0  # the longest query is accepted
    default = _search(tenant, position, query="sync")["results"]
    first = _search(tenant, position, query="sync", limit=25)["results"]
    rest = _search(tenant, position, query="sync", limit=25, offset=25)["results"]
    assert len(default) == 10
    assert [h["message_id"] for h in default] == [h["message_id"] for h in first[:10]]
    assert len(first) == 25
    assert len(rest) == 5
    assert len({h["message_id"] for h in first + rest}) == 30
    # equal relevance: the most recent first
    assert first[0]["external_id"] == "w29"


def test_snippets_are_centred_on_the_match_and_redacted(tenant: Tenant) -> None:
    secret = "sk-" + "A1b2C3d4" * 5
    text = "filler words " * 100 + f"the rollout key is {secret} for the zanzibar cluster " + "more filler " * 100
    position = tenant.say(text, message_id="long")["position"]
    hit = _search(tenant, position, query="zanzibar")["results"][0]
    snippet: str = hit["snippet"]
    assert len(snippet) <= 300
    assert snippet.startswith("…")
    assert snippet.endswith("…")
    assert "zanzibar" in snippet
    assert secret not in snippet
    assert secret[:6] in snippet


def test_responses_stay_under_32_kib(tenant: Tenant) -> None:
    # 4-byte characters make 25 snippets of 300 characters larger than the cap
    batch = [{"text": f"capword {index} " + "😀" * 400, "message_id": f"c{index}"} for index in range(25)]
    position = tenant.ingest.post("/v1/messages/batch", json={"messages": batch}).json()["results"][-1]["position"]
    response = tenant.recall.post(
        "/v1/sessions/search", json={"query": "capword", "limit": 25, "consistent_with": position}
    )
    assert response.status_code == 200
    assert len(response.content) <= 32 * 1024
    body = response.json()
    assert body["truncated"] is True
    assert 0 < len(body["results"]) < 25


def test_a_phrase_that_matches_nothing_falls_back_to_its_words(corpus: tuple[Tenant, str]) -> None:
    tenant, position = corpus
    exact = _search(tenant, position, query='"support group"', limit=25)["results"]
    assert "en-group-support" not in [hit["external_id"] for hit in exact]  # a phrase that matches stays strict
    loose = _search(tenant, position, query='"new parents group"', limit=25)["results"]
    assert loose[0]["external_id"] == "en-support-group"  # no message has it in that order
