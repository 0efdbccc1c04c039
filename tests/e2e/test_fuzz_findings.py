"""What the OpenAPI fuzzing (test_openapi_fuzz, test_accepted_is_applied) found, pinned as plain requests: numbers
the columns behind them cannot hold are refused with 422 at the door instead of failing in Postgres with a 500, and
a write is never answered as made when nothing was written."""

import httpx
import pytest

from cairn.local import LocalStack
from tests.conftest import Tenant

pytestmark = pytest.mark.e2e


def _refused(response: httpx.Response, field: str) -> None:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert [e["field"] for e in response.json()["errors"]] == [field]


def test_a_version_beyond_postgres_int_is_refused(tenant: Tenant) -> None:
    _refused(tenant.recall.get("/v1/memory/files/MEMORY.md", params={"version": 3661681456056348}), "version")
    put = tenant.ingest.put("/v1/memory/files/MEMORY.md", json={"text": "x"}, headers={"If-Match": '"2147483648"'})
    _refused(put, "If-Match")


@pytest.mark.parametrize("route", ["/v1/sessions/search", "/v1/memory/search"])
def test_a_position_beyond_postgres_bigint_is_refused(tenant: Tenant, route: str) -> None:
    response = tenant.recall.post(route, json={"query": "x", "consistent_with": "9999999999999999999"})
    _refused(response, "consistent_with")


def test_the_session_list_refuses_a_position_beyond_postgres_bigint(tenant: Tenant) -> None:
    response = tenant.recall.get("/v1/sessions", params={"consistent_with": "9999999999999999999"})
    _refused(response, "consistent_with")


def test_an_idempotency_key_reused_for_a_different_write_is_refused_not_answered_as_written(tenant: Tenant) -> None:
    """Found by test_accepted_is_applied: a generated `Idempotency-Key: null` sent again with another document and
    text was answered 200 with the first write's answer (its path and version) while nothing was written."""
    key = {"Idempotency-Key": "null"}
    first = tenant.ingest.put("/v1/memory/files/MEMORY.md", json={"text": "first"}, headers=key)
    assert first.status_code == 201, first.text
    retry = tenant.ingest.put("/v1/memory/files/MEMORY.md", json={"text": "first"}, headers=key)
    assert (retry.status_code, retry.json()) == (201, first.json()), "a retry of the same write is its first answer"

    for other in [
        tenant.ingest.put("/v1/memory/files/MEMORY.md", json={"text": "second"}, headers=key),
        tenant.ingest.put("/v1/memory/files/memory/bank/other.md", json={"text": "first"}, headers=key),
        tenant.ingest.put("/v1/memory/files/MEMORY.md", json={"text": "first", "agent_id": "other"}, headers=key),
        tenant.ingest.post("/v1/memory/daily", json={"text": "0", "date": "2026-12-01"}, headers=key),
    ]:
        _refused(other, "Idempotency-Key")
    markdown = {"Accept": "text/markdown"}
    assert tenant.recall.get("/v1/memory/files/MEMORY.md", headers=markdown).text == "first"
    never_written = [("main", "memory/bank/other.md"), ("other", "MEMORY.md"), ("main", "memory/daily/2026-12-01.md")]
    for agent, path in never_written:
        assert tenant.recall.get(f"/v1/memory/files/{path}", params={"agent_id": agent}).status_code == 404


PYDANTIC_ONLY = {"ge", "le", "gt", "lt", "min_length", "max_length"}  # keywords JSON Schema does not know


def _unknown_keywords(node: object, where: str = "") -> list[str]:
    if isinstance(node, list):
        return [found for i, item in enumerate(node) for found in _unknown_keywords(item, f"{where}/{i}")]
    if not isinstance(node, dict):
        return []
    here = [f"{where}/{key}" for key in node if key in PYDANTIC_ONLY and "properties" not in where.rsplit("/", 1)[-1]]
    return here + [found for key, value in node.items() for found in _unknown_keywords(value, f"{where}/{key}")]


@pytest.mark.parametrize("service", ["ingest", "recall"])
def test_the_documents_state_every_bound_where_json_schema_reads_it(services: LocalStack, service: str) -> None:
    """Found by test_accepted_is_applied: the bounds of an optional number of agent config (context_window,
    compaction) were written as pydantic's `ge`/`le`, and identity links lost their patterns, so valid requests
    generated from the document were refused; each bound is now a `minimum`/`maximum` or `pattern`."""
    document = httpx.get(f"{services.url(service)}/openapi.json", timeout=10).json()
    assert _unknown_keywords(document) == []
    if service == "ingest":
        body = document["paths"]["/v1/agents/{agent_id}/config"]["put"]["requestBody"]["content"]["application/json"]
        config = document["components"]["schemas"][body["schema"]["$ref"].rsplit("/", 1)[1]]["properties"]
        assert config["context_window"]["anyOf"][0] == {"maximum": 100_000_000, "minimum": 1000, "type": "integer"}
        links = config["identity_links"]["patternProperties"]
        assert next(iter(links.values()))["items"]["pattern"] == r"^[A-Za-z0-9_-]{1,64}:\S{1,256}$"


def test_a_resent_message_is_answered_with_the_session_it_is_stored_in(tenant: Tenant) -> None:
    """Found by test_accepted_is_applied: a re-send (same channel and message_id) routed elsewhere, here with an
    explicit session_key, was answered with the new key although the message is kept once, in the first one."""
    first = tenant.say("said once", message_id="m-1")
    again = tenant.say("said once", message_id="m-1", session_key="0")
    assert again == first
    history = tenant.recall.get(
        "/v1/sessions/agent:main:main/history", params={"consistent_with": first["position"]}
    ).json()
    assert [m["text"] for m in history["messages"]] == ["said once"]
    assert tenant.recall.get("/v1/sessions/0/history").status_code == 404
