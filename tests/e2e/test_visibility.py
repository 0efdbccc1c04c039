"""Session search visibility: self, tree (forks and spawned threads; everything from the main session),
agent and all — applied before the limit, so hidden sessions never take a place in the results."""

from typing import Any

import pytest

from tests.conftest import Tenant


def _keys(tenant: Tenant, caller: str | None, visibility: str, position: str, limit: int = 25) -> set[str]:
    body = {"query": "zebra", "caller_session_key": caller, "visibility": visibility, "limit": limit}
    found = tenant.recall.post("/v1/sessions/search", json={**body, "consistent_with": position})
    assert found.status_code == 200, found.text
    results: list[dict[str, Any]] = found.json()["results"]
    return {r["session_key"] for r in results}


@pytest.mark.e2e
def test_visibility_scopes(tenant: Tenant) -> None:
    a = tenant.ingest.post("/v1/sessions", json={}).json()["session_key"]
    tenant.say("a zebra in thread a", session_key=a, message_id="va")
    b = tenant.ingest.post(f"/v1/sessions/{a}/fork", json={}).json()["session_key"]  # child of a, with a's copy
    tenant.say("a zebra in thread b", session_key=b, message_id="vb")
    c = tenant.ingest.post("/v1/sessions", json={"parent_session_key": b}).json()["session_key"]  # grandchild
    tenant.say("a zebra in thread c", session_key=c, message_id="vc")
    other = tenant.ingest.post("/v1/sessions", json={}).json()["session_key"]
    tenant.say("a zebra elsewhere", session_key=other, message_id="vo")
    helper = tenant.say("a zebra of another agent", agent_id="helper", message_id="vh")
    last = tenant.say("a zebra in main", message_id="vm")
    # read-your-writes is per agent: wait for the helper agent's write with its own position
    assert tenant.search("zebra", consistent_with=helper["position"], agent_id="helper")["indexing"] is False

    assert _keys(tenant, a, "self", last["position"]) == {a}
    assert _keys(tenant, a, "tree", last["position"]) == {a, b, c}
    assert _keys(tenant, b, "tree", last["position"]) == {b, c}
    assert _keys(tenant, a, "agent", last["position"]) == {a, b, c, other, "agent:main:main"}
    assert _keys(tenant, "agent:main:main", "tree", last["position"]) == {a, b, c, other, "agent:main:main"}
    assert "agent:helper:main" in _keys(tenant, a, "all", last["position"])
    assert "agent:helper:main" not in _keys(tenant, a, "agent", last["position"])
    # applied before the limit: the best visible hit comes back even when hidden ones would outrank it
    assert _keys(tenant, c, "self", last["position"], limit=1) == {c}
