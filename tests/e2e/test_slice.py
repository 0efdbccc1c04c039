"""The walking skeleton end to end: real processes, real servers, the public HTTP API only."""

import secrets
import time
from collections.abc import Callable
from typing import Any

import httpx

from cairn.local import LocalStack
from tests.collector import SpanCollector
from tests.conftest import Tenant


def eventually(check: Callable[[], Any], timeout: float = 20.0, interval: float = 0.1) -> Any:
    """Poll until `check` returns something truthy; bounded, never a fixed sleep."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(interval)


def test_chinese_fragment_is_found_and_other_tenants_see_nothing(tenant: Tenant, other_tenant: Tenant) -> None:
    written = tenant.say(
        "下周二我去上海参加产品发布会",
        channel="telegram",
        peer_id="123",
        message_id="tg-99812",
        occurred_at="2026-11-29T09:30:00+08:00",
    )
    tenant.say("I will bring the slides for the launch", role="assistant")
    found = tenant.search("上海", consistent_with=written["position"])
    assert found["indexing"] is False
    results = found["results"]
    assert isinstance(results, list)
    assert len(results) == 1
    assert results[0]["snippet"] == "下周二我去上海参加产品发布会"
    assert results[0]["session_key"] == "agent:main:main"
    assert results[0]["occurred_at"] == "2026-11-29T01:30:00Z"  # event time kept, not ingest time
    assert other_tenant.search("上海")["results"] == []


def test_english_words_and_stems_are_found(tenant: Tenant) -> None:
    written = tenant.say("We are running the quarterly planning on Thursday", role="user")
    hits = tenant.search("run planning", consistent_with=written["position"])["results"]
    assert isinstance(hits, list)
    assert [h["snippet"] for h in hits] == ["We are running the quarterly planning on Thursday"]
    assert tenant.search("spreadsheet", consistent_with=written["position"])["results"] == []


def test_resending_the_same_message_id_stores_it_once(tenant: Tenant) -> None:
    first = tenant.say("the parcel arrives on Friday", channel="telegram", peer_id="7", message_id="m-1")
    again = tenant.say("the parcel arrives on Friday", channel="telegram", peer_id="7", message_id="m-1")
    assert again["event_id"] == first["event_id"]
    assert again["position"] == first["position"]
    hits = tenant.search("parcel", consistent_with=first["position"])["results"]
    assert isinstance(hits, list)
    assert len(hits) == 1


def test_malformed_body_gets_problem_json_and_nothing_is_stored(tenant: Tenant) -> None:
    response = tenant.ingest.post("/v1/messages", json={"text": "", "chat_type": "telepathy", "role": "oracle"})
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert {e["field"] for e in problem["errors"]} == {"text", "chat_type", "role"}
    assert problem["status"] == 422
    assert problem["title"]
    assert problem["detail"]
    too_long = tenant.ingest.post("/v1/messages", json={"text": "x" * 70_000})
    assert too_long.status_code == 413
    assert too_long.json()["errors"][0]["field"] == "text"
    assert "65536" in too_long.json()["errors"][0]["message"]
    marker = tenant.say("a later valid message")
    assert tenant.search("telepathy oracle", consistent_with=marker["position"])["results"] == []


def test_requests_without_a_valid_key_are_refused(services: LocalStack) -> None:
    response = httpx.post(
        f"{services.url('recall')}/v1/sessions/search",
        json={"query": "x"},
        headers={"Authorization": "Bearer ck_not-a-key"},
    )
    assert response.status_code == 401
    assert response.headers["content-type"].startswith("application/problem+json")
    assert (
        httpx.post(
            f"{services.url('ingest')}/v1/admin/tenants",
            json={"name": "x"},
            headers={"Authorization": "Bearer wrong"},
        ).status_code
        == 401
    )


def test_search_limits_are_enforced(tenant: Tenant) -> None:
    for body in (
        {"query": ""},
        {"query": "x" * 4097},
        {"query": "x", "limit": 26},
        {"query": "x", "limit": 0},
    ):
        response = tenant.recall.post("/v1/sessions/search", json=body)
        assert response.status_code == 422, body


def test_reset_writes_a_snapshot_of_the_closed_window(tenant: Tenant, other_tenant: Tenant) -> None:
    peer = {"channel": "telegram", "peer_id": "42"}
    for i in range(18):
        tenant.say(f"user line {i}", message_id=f"u{i}", **peer)
        tenant.say(f"assistant line {i}", role="assistant", message_id=f"a{i}", **peer)
    tenant.say("/status", message_id="cmd-1", **peer)
    tenant.say("/new", message_id="reset-1", **peer)

    def snapshots() -> list[dict[str, Any]]:
        listing = tenant.recall.get("/v1/memory/files", params={"prefix": "memory/snapshots/"})
        assert listing.status_code == 200
        files: list[dict[str, Any]] = listing.json()["files"]
        return files

    files = eventually(snapshots)
    assert len(files) == 1
    document = tenant.recall.get(f"/v1/memory/files/{files[0]['path']}")
    assert document.status_code == 200
    text = document.json()["text"]
    # only the last 15 user/assistant messages: assistant 10 … 17 and user 11 … 17
    assert "assistant line 17" in text
    assert "assistant line 10\n" in text
    assert "user line 11\n" in text
    assert "user line 10\n" not in text
    assert "assistant line 9\n" not in text
    assert "/status" not in text
    assert tenant.recall.get("/v1/memory/files/memory/snapshots/none.md").status_code == 404
    # another tenant's key gets a 404 for the same path, never a hint that it exists
    assert other_tenant.recall.get(f"/v1/memory/files/{files[0]['path']}").status_code == 404
    assert other_tenant.recall.get("/v1/memory/files", params={"prefix": "memory/"}).json()["files"] == []


def test_one_trace_spans_ingest_session_and_indexer(tenant: Tenant, span_collector: SpanCollector) -> None:
    trace_id = secrets.token_hex(16)
    response = tenant.ingest.post(
        "/v1/messages",
        json={"text": "trace me through every service"},
        headers={"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"},
    )
    assert response.status_code == 202
    tenant.search("trace", consistent_with=response.json()["position"])
    services = eventually(
        lambda: (
            {"cairn-ingest", "cairn-session", "cairn-indexer"} <= span_collector.services_in_trace(trace_id)
            and span_collector.services_in_trace(trace_id)
        )
    )
    assert {"cairn-ingest", "cairn-session", "cairn-indexer"} <= services


def test_a_reset_boundary_carries_long_messages_cut_to_4000_characters(tenant: Tenant) -> None:
    tenant.say("long " + "y" * 9000, message_id="long-1")
    tenant.say("/new", message_id="long-reset")

    def snapshots() -> list[dict[str, Any]]:
        files: list[dict[str, Any]] = tenant.recall.get("/v1/memory/files", params={"prefix": "memory/"}).json()[
            "files"
        ]
        return files

    (snapshot,) = eventually(snapshots)
    text = tenant.recall.get(f"/v1/memory/files/{snapshot['path']}").json()["text"]
    assert "y" * 3990 in text
    assert "y" * 4000 not in text  # "long " + 3995 y's: the first 4000 characters of the message
