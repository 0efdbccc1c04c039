"""Daily and idle reset policies end to end: after the agent's idle time a message continues in a new
session (new id, same key), the old one is closed with a boundary and snapshotted."""

import time
from typing import Any

import pytest

from tests.conftest import Tenant


def _hits(tenant: Tenant, query: str, position: str) -> list[dict[str, Any]]:
    results = tenant.search(query, consistent_with=position)["results"]
    assert isinstance(results, list)
    return results


@pytest.mark.e2e
def test_an_idle_session_continues_in_a_new_session(tenant: Tenant) -> None:
    configured = tenant.ingest.put("/v1/agents/main/config", json={"reset": {"mode": "idle", "idle_minutes": 30}})
    assert configured.status_code == 200, configured.text
    tenant.say("we talked about the harbour walk", message_id="f1", occurred_at="2026-11-29T09:00:00+00:00")
    soon = tenant.say("and the lighthouse", message_id="f2", occurred_at="2026-11-29T09:20:00+00:00")
    later = tenant.say("back after lunch: the museum", message_id="f3", occurred_at="2026-11-29T11:00:00+00:00")
    assert later["session_key"] == soon["session_key"] == "agent:main:main"

    (harbour,) = _hits(tenant, "harbour", later["position"])
    (lighthouse,) = _hits(tenant, "lighthouse", later["position"])
    (museum,) = _hits(tenant, "museum", later["position"])
    assert harbour["session_id"] == lighthouse["session_id"]
    assert museum["session_id"] != harbour["session_id"]

    history = tenant.recall.get("/v1/sessions/agent:main:main/history").json()
    assert history["session_id"] == museum["session_id"]
    assert [m["text"] for m in history["messages"]] == ["back after lunch: the museum"]
    # the key's earlier session stays readable by its id
    earlier = tenant.recall.get("/v1/sessions/agent:main:main/history", params={"session_id": harbour["session_id"]})
    assert earlier.status_code == 200, earlier.text
    assert earlier.json()["session_id"] == harbour["session_id"]
    assert [m["text"] for m in earlier.json()["messages"]] == ["we talked about the harbour walk", "and the lighthouse"]

    deadline = time.monotonic() + 20
    files: list[dict[str, Any]] = []
    while not files and time.monotonic() < deadline:
        files = tenant.recall.get("/v1/memory/files", params={"prefix": "memory/snapshots/"}).json()["files"]
        time.sleep(0.1)
    assert len(files) == 1
    snapshot = tenant.recall.get(f"/v1/memory/files/{files[0]['path']}").json()["text"]
    assert "harbour walk" in snapshot
    assert "idle" in snapshot
