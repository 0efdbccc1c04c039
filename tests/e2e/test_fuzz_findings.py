"""What the OpenAPI fuzzing (test_openapi_fuzz) found, pinned as plain requests: numbers the columns behind them
cannot hold are refused with 422 at the door instead of failing in Postgres with a 500."""

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
