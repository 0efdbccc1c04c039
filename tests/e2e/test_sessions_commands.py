"""Session commands end to end, through the public HTTP API: agent configuration and the routing it
drives, console threads, forks, and the precise refusals of bad input."""

import re
from typing import Any

import pytest

from tests.conftest import Tenant

pytestmark = pytest.mark.e2e

CONFIG = {
    "dm_scope": "per-channel-peer",
    "identity_links": {"alice": ["telegram:123", "discord:987"]},
    "reset": {"mode": "daily", "at_hour": 5, "timezone": "Asia/Shanghai"},
    "context_window": 200000,
    "sessions_visibility": "tree",
    "remember_across_conversations": None,
}
CONSOLE_KEY = re.compile(r"agent:main:dashboard:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}")


def _configure(tenant: Tenant, **config: Any) -> dict[str, Any]:
    response = tenant.ingest.put("/v1/agents/main/config", json=config)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _hits(tenant: Tenant, query: str, position: str) -> list[dict[str, Any]]:
    found = tenant.search(query, consistent_with=position)
    assert found["indexing"] is False
    results: list[dict[str, Any]] = found["results"]  # type: ignore[assignment]
    return results


def _problem(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem: dict[str, Any] = response.json()
    assert problem["status"] == status
    return problem


def test_config_put_then_get_returns_the_effective_config(tenant: Tenant, other_tenant: Tenant) -> None:
    fresh = tenant.ingest.get("/v1/agents/main/config")
    assert fresh.status_code == 200
    assert fresh.headers["etag"] == '"0"'
    assert fresh.json()["dm_scope"] == "main"

    put = tenant.ingest.put("/v1/agents/main/config", json=CONFIG)
    assert put.status_code == 200, put.text
    effective = {
        **CONFIG,
        "reset": {**CONFIG["reset"], "idle_minutes": 60},  # type: ignore[dict-item]
        "group_scope": "group",
        "reset_by_type": {},
        "retention": {"dormant_after_days": None, "archive_after_days": None},
        "compaction": {"reserve_tokens": None, "soft_threshold_tokens": None, "max_transcript_bytes": None},
        "active_memory": {
            "mode": "escalate", "query_mode": "recent", "allowed_chat_types": ["direct"], "allowed_chat_ids": [],
            "denied_chat_ids": [], "timeout_ms": 15000, "min_score": 0.65,
        },
        "owner_peers": [],
    }  # fmt: skip
    assert put.json() == effective
    assert put.headers["etag"] == '"1"'
    got = tenant.ingest.get("/v1/agents/main/config")
    assert (got.json(), got.headers["etag"]) == (effective, '"1"')

    stale = tenant.ingest.put("/v1/agents/main/config", json={}, headers={"If-Match": '"0"'})
    assert "version 1" in _problem(stale, 409)["detail"]
    again = tenant.ingest.put("/v1/agents/main/config", json=got.json(), headers={"If-Match": '"1"'})
    assert (again.status_code, again.headers["etag"]) == (200, '"2"')
    assert other_tenant.ingest.get("/v1/agents/main/config").headers["etag"] == '"0"'


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"dm_scope": "per-user"}, "dm_scope"),
        ({"reset": {"mode": "daily", "timezone": "Mars/Olympus_Mons"}}, "reset.timezone"),
        ({"reset": {"at_hour": 24}}, "reset.at_hour"),
        ({"context_window": 500}, "context_window"),
        ({"sessions_visibility": "public"}, "sessions_visibility"),
        ({"identity_links": {"alice": ["123"]}}, "identity_links.alice.0"),
        ({"active_memory": {"mode": "never"}}, "active_memory.mode"),
        ({"active_memory": {"timeout_ms": 249}}, "active_memory.timeout_ms"),
        ({"active_memory": {"timeout_ms": 120_001}}, "active_memory.timeout_ms"),
        ({"active_memory": {"min_score": 1.5}}, "active_memory.min_score"),
        ({"active_memory": {"allowed_chat_types": ["dm"]}}, "active_memory.allowed_chat_types.0"),
        ({"active_memory": {"denied_chat_ids": ["x"] * 257}}, "active_memory.denied_chat_ids"),
        ({"owner_peers": ["123"]}, "owner_peers.0"),
    ],
)
def test_a_bad_config_is_422_naming_the_field_and_changes_nothing(
    tenant: Tenant, config: dict[str, Any], field: str
) -> None:
    problem = _problem(tenant.ingest.put("/v1/agents/main/config", json=config), 422)
    assert [e["field"] for e in problem["errors"]] == [field]
    assert tenant.ingest.get("/v1/agents/main/config").headers["etag"] == '"0"'


def test_main_shares_one_session_between_people_and_per_channel_peer_separates_them(tenant: Tenant) -> None:
    first = tenant.say("main scope note from peer one", channel="telegram", peer_id="111")
    second = tenant.say("main scope note from peer two", channel="telegram", peer_id="222")
    assert first["session_key"] == second["session_key"] == "agent:main:main"
    assert int(second["position"]) > int(first["position"])
    shared = _hits(tenant, "main scope note", second["position"])
    assert len(shared) == 2
    assert len({h["session_id"] for h in shared}) == 1

    _configure(tenant, dm_scope="per-channel-peer")
    one = tenant.say("separated scope note from peer one", channel="telegram", peer_id="111")
    two = tenant.say("separated scope note from peer two", channel="telegram", peer_id="222")
    assert one["session_key"] == "agent:main:telegram:direct:111"
    assert two["session_key"] == "agent:main:telegram:direct:222"
    separated = _hits(tenant, "separated", two["position"])
    assert {h["session_key"] for h in separated} == {one["session_key"], two["session_key"]}
    assert len({h["session_id"] for h in separated}) == 2


def test_identity_links_put_one_person_in_one_session_across_channels(tenant: Tenant) -> None:
    _configure(tenant, dm_scope="per-peer", identity_links={"alice": ["telegram:123", "discord:987"]})
    on_telegram = tenant.say("linked identity on telegram", channel="telegram", peer_id="123")
    on_discord = tenant.say("linked identity on discord", channel="discord", peer_id="987")
    stranger = tenant.say("linked identity stranger", channel="discord", peer_id="123")
    assert on_telegram["session_key"] == on_discord["session_key"] == "agent:main:direct:alice"
    assert stranger["session_key"] == "agent:main:direct:123"
    hits = _hits(tenant, "linked", stranger["position"])
    by_key = {h["session_key"]: h["session_id"] for h in hits}
    assert len(hits) == 3
    assert len({h["session_id"] for h in hits if h["session_key"] == "agent:main:direct:alice"}) == 1
    assert by_key["agent:main:direct:alice"] != by_key["agent:main:direct:123"]


def test_a_console_thread_is_created_and_a_message_lands_in_it(tenant: Tenant) -> None:
    created = tenant.ingest.post("/v1/sessions", json={"agent_id": "main"})
    assert created.status_code == 201, created.text
    thread = created.json()
    assert CONSOLE_KEY.fullmatch(thread["session_key"])
    written = tenant.say("console thread about the quarterly budget", session_key=thread["session_key"])
    assert written["session_key"] == thread["session_key"]
    [hit] = _hits(tenant, "quarterly budget", written["position"])
    assert (hit["session_key"], hit["session_id"]) == (thread["session_key"], thread["session_id"])
    second = tenant.ingest.post("/v1/sessions", json={}).json()
    assert second["session_key"] != thread["session_key"]
    assert second["session_id"] != thread["session_id"]


def test_thread_requests_that_cannot_be_served_are_refused(tenant: Tenant) -> None:
    incognito_fork = _problem(tenant.ingest.post("/v1/sessions", json={"incognito": True, "fork": True}), 422)
    assert [e["field"] for e in incognito_fork["errors"]] == ["fork"]
    orphan_fork = _problem(tenant.ingest.post("/v1/sessions", json={"fork": True}), 422)
    assert [e["field"] for e in orphan_fork["errors"]] == ["parent_session_key"]
    _problem(tenant.ingest.post("/v1/sessions", json={"parent_session_key": "agent:main:nowhere"}), 404)


def test_fork_copies_the_history_into_a_new_session_and_leaves_the_parent(tenant: Tenant) -> None:
    peer = {"channel": "telegram", "peer_id": "42"}
    tenant.say("we chose the harbour venue for the offsite", message_id="tg-1", **peer)
    tenant.say("the harbour venue needs a deposit", role="assistant", message_id="tg-2", **peer)
    forked = tenant.ingest.post("/v1/sessions/agent:main:main/fork", json={"agent_id": "main"})
    assert forked.status_code == 201, forked.text
    child = forked.json()
    assert CONSOLE_KEY.fullmatch(child["session_key"])

    hits = _hits(tenant, "harbour", child["position"])
    assert len(hits) == 4, hits
    sessions = {(h["session_key"], h["session_id"]) for h in hits}
    parent_id = next(sid for key, sid in sessions if key == "agent:main:main")
    assert sessions == {("agent:main:main", parent_id), (child["session_key"], child["session_id"])}
    assert child["session_id"] != parent_id
    assert {h["occurred_at"] for h in hits if h["session_id"] == parent_id} == {
        h["occurred_at"] for h in hits if h["session_id"] == child["session_id"]
    }
    later = tenant.say("the harbour venue is booked", session_key=child["session_key"])
    assert len(_hits(tenant, "booked", later["position"])) == 1  # the child goes on alone


def test_fork_from_a_message_copies_up_to_it(tenant: Tenant) -> None:
    for n, word in enumerate(["alpha", "bravo", "charlie"]):
        tenant.say(f"milestone {word} reached", channel="telegram", peer_id="7", message_id=f"ms-{n}")
    forked = tenant.ingest.post("/v1/sessions/agent:main:main/fork", json={"from_message_id": "ms-1"})
    assert forked.status_code == 201, forked.text
    child = forked.json()
    in_child = {
        h["snippet"] for h in _hits(tenant, "milestone", child["position"]) if h["session_id"] == child["session_id"]
    }
    assert in_child == {"milestone alpha reached", "milestone bravo reached"}

    unknown = tenant.ingest.post("/v1/sessions/agent:main:main/fork", json={"from_message_id": "ms-404"})
    assert [e["field"] for e in _problem(unknown, 422)["errors"]] == ["from_message_id"]


def test_fork_of_an_unknown_or_another_tenants_session_is_404(tenant: Tenant, other_tenant: Tenant) -> None:
    _problem(tenant.ingest.post("/v1/sessions/agent:main:nowhere/fork", json={}), 404)
    created = other_tenant.ingest.post("/v1/sessions", json={}).json()
    other_tenant.say("a secret of the other tenant", session_key=created["session_key"])
    theirs = tenant.ingest.post(f"/v1/sessions/{created['session_key']}/fork", json={})
    assert "another" not in _problem(theirs, 404)["detail"]


def test_a_text_over_the_size_limit_is_413_naming_text_and_the_limit(tenant: Tenant) -> None:
    for text in ("x" * 70_000, "上" * 30_000):  # 70,000 bytes; 90,000 bytes in 30,000 characters
        problem = _problem(tenant.ingest.post("/v1/messages", json={"text": text}), 413)
        [error] = problem["errors"]
        assert error["field"] == "text"
        assert "65536 bytes" in error["message"]
    batch = tenant.ingest.post("/v1/messages/batch", json={"messages": [{"text": "x" * 70_000}, {"text": "fine"}]})
    assert batch.status_code == 202
    assert batch.json()["accepted"] == 1
    assert batch.json()["results"][0]["error"]["status"] == 413


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"occurred_at": "2026-11-29T09:30:00"}, "occurred_at"),
        ({"occurred_at": "next tuesday"}, "occurred_at"),
        ({"session_key": "agent:main:has space"}, "session_key"),
        ({"session_key": "k" * 513}, "session_key"),
    ],
    ids=["naive-time", "not-a-time", "key-with-space", "key-too-long"],
)
def test_bad_times_and_keys_are_422_naming_the_field(tenant: Tenant, fields: dict[str, str], field: str) -> None:
    problem = _problem(tenant.ingest.post("/v1/messages", json={"text": "hello", **fields}), 422)
    assert [e["field"] for e in problem["errors"]] == [field]


def test_a_reset_of_a_key_with_a_space_is_422(tenant: Tenant) -> None:
    response = tenant.ingest.post("/v1/sessions/agent:main:a%20b/reset", json={})
    assert [e["field"] for e in _problem(response, 422)["errors"]] == ["session_key"]
