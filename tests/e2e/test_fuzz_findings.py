"""What the OpenAPI fuzzing (test_openapi_fuzz, test_accepted_is_applied) found, pinned as plain requests: numbers
the columns behind them cannot hold are refused with 422 at the door instead of failing in Postgres with a 500, and
a write is never answered as made when nothing was written."""

import httpx
import pytest

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
