"""API.md as written: every endpoint called with the bodies, query parameters and headers the contract
shows, over HTTP against the real services, checking the status, the documented fields and names, the
defaults and limits (problem+json naming the field and the limit), auth and tenant isolation."""

import re
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import httpx
import pytest

from cairn.local import LocalStack
from tests.conftest import Tenant

pytestmark = pytest.mark.e2e
T = TypeVar("T")
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")

# The example body of `POST /v1/messages`, verbatim.
MESSAGE = {
    "agent_id": "main", "channel": "telegram", "account_id": "bot1", "chat_type": "direct",
    "peer_id": "123", "chat_id": None, "thread_id": None, "sender_name": "Alice",
    "role": "user", "text": "下周二我去上海", "message_id": "tg-99812",
    "occurred_at": "2026-11-29T09:30:00+08:00", "session_key": None,
}  # fmt: skip


def eventually(check: Callable[[], T | None], timeout: float = 30.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            assert result, "the projection never caught up"
            return result
        time.sleep(0.1)


def problem(response: httpx.Response, status: int, field: str | None = None, limit: str | None = None) -> Any:
    """A problem+json answer with the RFC 9457 members; for a validation failure, `errors` names the field
    (and its message the limit)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert {"type", "title", "status", "detail"} <= body.keys()
    assert body["status"] == status
    if field is not None:
        messages = [e["message"] for e in body["errors"] if e["field"] == field]
        assert messages, body
        if limit is not None:
            assert any(limit in m for m in messages), body
    return body


def history(tenant: Tenant, key: str, **params: Any) -> httpx.Response:
    return tenant.recall.get(f"/v1/sessions/{key}/history", params=params)


def history_when(tenant: Tenant, key: str, ready: Callable[[dict[str, Any]], bool], **params: Any) -> dict[str, Any]:
    def attempt() -> dict[str, Any] | None:
        response = history(tenant, key, **params)
        if response.status_code != 200:
            return None
        page: dict[str, Any] = response.json()
        return page if ready(page) else None

    return eventually(attempt)


# ---------------------------------------------------------------------------------------------------
# Command side


def test_a_message_as_written_is_accepted_once_and_kept_with_its_event_time(tenant: Tenant) -> None:
    first = tenant.ingest.post("/v1/messages", json=MESSAGE)
    assert first.status_code == 202, first.text
    accepted = first.json()
    assert {"event_id", "session_key", "position"} <= accepted.keys()
    assert accepted["session_key"] == "agent:main:main"  # dm_scope main by default
    again = tenant.ingest.post("/v1/messages", json=MESSAGE).json()
    assert again["event_id"] == accepted["event_id"]  # same tenant + channel + message_id: one message

    page = history_when(tenant, "agent:main:main", lambda p: bool(p["messages"]), agent_id="main")
    assert [m["text"] for m in page["messages"]] == ["下周二我去上海"]
    message = page["messages"][0]
    assert {"message_id", "role", "sender_name", "text", "occurred_at", "position"} <= message.keys()
    assert (message["role"], message["sender_name"]) == ("user", "Alice")
    assert message["message_id"] == "tg-99812"  # the id it was written with
    assert RFC3339.match(message["occurred_at"])
    assert message["occurred_at"].startswith("2026-11-29T01:30:00")  # 09:30 at +08:00, kept as said


def test_new_from_a_user_resets_the_session_instead_of_being_stored(tenant: Tenant) -> None:
    tenant.say("before the reset", message_id="m-1")
    tenant.say("/new", message_id="m-2")
    tenant.say("after the reset", message_id="m-3")
    page = history_when(tenant, "agent:main:main", lambda p: [m["text"] for m in p["messages"]] == ["after the reset"])
    assert page["window"] == {"reset_index": 1, "has_earlier_windows": True}


def test_a_text_over_the_limit_is_413_naming_the_field_and_the_limit(tenant: Tenant) -> None:
    too_large = tenant.ingest.post("/v1/messages", json={**MESSAGE, "text": "x" * (64 * 1024 + 1)})
    problem(too_large, 413, "text", str(64 * 1024))
    problem(tenant.ingest.post("/v1/messages", json={**MESSAGE, "chat_type": "dm"}), 422, "chat_type")


def test_a_batch_answers_per_item_and_is_capped_at_1000(tenant: Tenant) -> None:
    good = {**MESSAGE, "message_id": "b-1", "text": "第一条"}
    response = tenant.ingest.post("/v1/messages/batch", json={"messages": [good, {**good, "role": "robot"}]})
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["accepted"] == 1
    assert {"event_id", "session_key", "position"} <= body["results"][0].keys()
    assert "error" in body["results"][1]

    too_many = [{"text": f"m{i}"} for i in range(1001)]
    problem(tenant.ingest.post("/v1/messages/batch", json={"messages": too_many}), 422, "messages", "1000")


def test_console_threads_resets_and_forks_as_written(tenant: Tenant) -> None:
    body = {"agent_id": "main", "incognito": False, "parent_session_key": None, "fork": False}
    created = tenant.ingest.post("/v1/sessions", json=body)
    assert created.status_code == 201, created.text
    thread = created.json()
    assert re.fullmatch(r"agent:main:dashboard:[0-9a-f-]{36}", thread["session_key"])
    assert UUID.match(thread["session_id"])
    key = thread["session_key"]
    said = tenant.say("hello thread", session_key=key)
    history_when(tenant, key, lambda p: bool(p["messages"]))

    reset = tenant.ingest.post(f"/v1/sessions/{key}/reset", json={"agent_id": "main", "reason": "api"})
    assert reset.status_code == 202, reset.text
    assert int(reset.json()["position"]) > int(said["position"])
    page = history_when(tenant, key, lambda p: p["window"]["reset_index"] == 1)
    assert page["session_id"] == thread["session_id"]  # a reset keeps the id

    fork = tenant.ingest.post(f"/v1/sessions/{key}/fork", json={"agent_id": "main", "from_message_id": None})
    assert fork.status_code == 201, fork.text
    child = fork.json()
    assert child["session_key"] != key
    assert UUID.match(child["session_id"])
    problem(tenant.ingest.post("/v1/sessions", json={**body, "fork": True}), 422, "parent_session_key")


def test_forking_another_tenants_session_is_404(tenant: Tenant, other_tenant: Tenant) -> None:
    key = tenant.ingest.post("/v1/sessions", json={"agent_id": "main"}).json()["session_key"]
    tenant.say("mine", session_key=key)
    history_when(tenant, key, lambda p: bool(p["messages"]))
    problem(other_tenant.ingest.post(f"/v1/sessions/{key}/fork", json={"agent_id": "main"}), 404)


def test_admin_creates_tenants_with_the_admin_token_only(services: LocalStack, tenant: Tenant) -> None:
    url = f"{services.url('ingest')}/v1/admin/tenants"
    admin = {"Authorization": f"Bearer {services.state.admin_token}"}
    created = httpx.post(url, json={"name": "acme"}, headers=admin, timeout=10)
    assert created.status_code == 201, created.text
    assert UUID.match(created.json()["tenant_id"])
    assert created.json()["api_key"]
    problem(httpx.post(url, json={"name": "acme"}, timeout=10), 401)
    problem(httpx.post(url, json={"name": "acme"}, headers={"Authorization": "Bearer nope"}, timeout=10), 401)
    # a tenant's key is a valid key, but not allowed here
    problem(tenant.ingest.post("/v1/admin/tenants", json={"name": "acme"}), 403)


def test_agent_config_as_written_answers_the_full_effective_config(tenant: Tenant) -> None:
    config = {
        "dm_scope": "per-channel-peer", "identity_links": {"alice": ["telegram:123", "discord:987"]},
        "reset": {"mode": "none"}, "context_window": 200000, "sessions_visibility": "tree",
        "remember_across_conversations": None,
    }  # fmt: skip
    put = tenant.ingest.put("/v1/agents/main/config", json=config)
    assert put.status_code == 200, put.text
    effective = put.json()
    for field, value in config.items():
        if field != "reset":
            assert effective[field] == value
    assert effective["reset"]["mode"] == "none"
    assert "timezone" in effective["reset"]
    assert {"group_scope", "retention", "compaction"} <= effective.keys()
    assert effective["active_memory"] == {
        "mode": "escalate", "query_mode": "recent", "allowed_chat_types": ["direct"], "allowed_chat_ids": [],
        "denied_chat_ids": [], "timeout_ms": 15000, "min_score": 0.65,
    }  # fmt: skip
    assert tenant.ingest.get("/v1/agents/main/config").json() == effective
    # the config routes: Alice on telegram now has her own session (per-channel-peer, linked identity)
    said = tenant.say("hi", channel="telegram", peer_id="123", message_id="cfg-1")
    assert said["session_key"] == "agent:main:telegram:direct:alice"


# ---------------------------------------------------------------------------------------------------
# Query side


def test_session_search_as_written(tenant: Tenant) -> None:
    said = tenant.ingest.post("/v1/messages", json=MESSAGE).json()
    body = {"agent_id": "main", "query": "上海", "limit": 10, "caller_session_key": "agent:main:main",
            "consistent_with": said["position"]}  # fmt: skip
    response = tenant.recall.post("/v1/sessions/search", json=body)
    assert response.status_code == 200, response.text
    found = response.json()
    assert (found["truncated"], found["indexing"]) == (False, False)
    [hit] = found["results"]
    assert {"session_key", "session_id", "message_id", "role", "occurred_at", "snippet", "score"} <= hit.keys()
    assert (hit["session_key"], hit["role"]) == ("agent:main:main", "user")
    assert hit["message_id"] == "tg-99812"  # the id it was written with
    assert "上海" in hit["snippet"]
    assert RFC3339.match(hit["occurred_at"])


def test_session_search_limit_defaults_to_10_within_1_to_25(tenant: Tenant) -> None:
    position = ""
    for i in range(12):
        position = tenant.say(f"zebra number {i}", message_id=f"z-{i}")["position"]
    found: Any = tenant.search("zebra", consistent_with=position)
    assert len(found["results"]) == 10
    everything: Any = tenant.search("zebra", limit=25)
    assert len(everything["results"]) == 12
    search = "/v1/sessions/search"
    problem(tenant.recall.post(search, json={"query": "zebra", "limit": 26}), 422, "limit", "25")
    problem(tenant.recall.post(search, json={"query": "zebra", "limit": 0}), 422, "limit", "1")
    problem(tenant.recall.post(search, json={"query": "z" * 4097}), 422, "query", "4096")
    problem(tenant.recall.post(search, json={"query": ""}), 422, "query")


def test_history_takes_the_documented_query_parameters(tenant: Tenant) -> None:
    first = tenant.say("one", message_id="h-1")
    tenant.say("two", message_id="h-2")
    tenant.say("/reset", message_id="h-3")
    tenant.say("three", message_id="h-4")
    key = "agent:main:main"
    latest = history_when(tenant, key, lambda p: [m["text"] for m in p["messages"]] == ["three"])
    assert {"session_key", "session_id", "messages", "window", "truncated", "has_more", "next_offset", "bytes"} <= (
        latest.keys()
    )
    params = {"agent_id": "main", "session_id": latest["session_id"], "message_id": "h-1", "limit": 1,
              "offset": 0, "include_tools": "false"}  # fmt: skip
    earlier = history(tenant, key, **params)
    assert earlier.status_code == 200, earlier.text
    page = earlier.json()
    assert [m["text"] for m in page["messages"]] == ["two"]  # the closed window, newest first, paged by 1
    assert (page["window"]["reset_index"], page["has_more"], page["next_offset"]) == (0, True, 1)
    assert page["messages"][0]["position"] > 0
    assert int(first["position"]) > 0


def test_history_and_listing_read_your_writes_with_consistent_with(tenant: Tenant) -> None:
    """No polling: with the write's position, the first read already holds the write."""
    said = tenant.say("just now", message_id="c-1")
    page = history(tenant, said["session_key"], agent_id="main", consistent_with=said["position"])
    assert page.status_code == 200, page.text
    assert [m["text"] for m in page.json()["messages"]] == ["just now"]
    assert page.json()["indexing"] is False
    assert page.json()["bytes"] == len(page.content)

    group = tenant.say("in the group", chat_type="group", chat_id="g7", channel="slack", message_id="c-2")
    listing = tenant.recall.get("/v1/sessions", params={"agent_id": "main", "consistent_with": group["position"]})
    assert listing.status_code == 200, listing.text
    keys = {s["session_key"] for s in listing.json()["sessions"]}
    assert keys == {"agent:main:main", "agent:main:slack:group:g7"}
    assert listing.json()["indexing"] is False


def test_a_position_not_reached_answers_what_is_stored_with_indexing_true(tenant: Tenant) -> None:
    said = tenant.say("stored", message_id="c-3")
    history_when(tenant, said["session_key"], lambda p: bool(p["messages"]))
    ahead = str(int(said["position"]) + 1_000_000)
    page = history(tenant, said["session_key"], consistent_with=ahead)  # waits out the bound (5 s)
    assert page.status_code == 200, page.text
    assert (page.json()["indexing"], [m["text"] for m in page.json()["messages"]]) == (True, ["stored"])
    assert page.json()["bytes"] == len(page.content)
    problem(history(tenant, said["session_key"], consistent_with="soon"), 422, "consistent_with")
    problem(tenant.recall.get("/v1/sessions", params={"consistent_with": "-1"}), 422, "consistent_with")


def test_query_strings_written_as_api_md_templates_take_the_defaults(tenant: Tenant) -> None:
    """`?agent_id=&prefix=` as API.md writes it: an empty parameter is the default (agent `main`)."""
    said = tenant.say("template", message_id="q-1")
    key = said["session_key"]
    raw = "agent_id=&session_id=&message_id=&limit=&offset=&include_tools="
    page = tenant.recall.get(f"/v1/sessions/{key}/history?{raw}&consistent_with={said['position']}")
    assert page.status_code == 200, page.text
    assert [m["text"] for m in page.json()["messages"]] == ["template"]
    listing = tenant.recall.get("/v1/sessions?agent_id=&chat_type=&status=&limit=&cursor=")
    assert listing.status_code == 200, listing.text
    assert [s["session_key"] for s in listing.json()["sessions"]] == [key]

    assert tenant.ingest.put("/v1/memory/files/MEMORY.md", json={"text": "- a\n- b\n"}).status_code == 201
    files = tenant.recall.get("/v1/memory/files?agent_id=&prefix=")
    assert files.status_code == 200, files.text
    assert [f["path"] for f in files.json()["files"]] == ["MEMORY.md"]
    window = tenant.recall.get("/v1/memory/files/MEMORY.md?agent_id=&from=&lines=")
    assert window.status_code == 200, window.text
    assert (window.json()["from"], window.json()["text"]) == (1, "- a\n- b\n")
    status = tenant.recall.get("/v1/memory/status?agent_id=")
    assert status.status_code == 200, status.text
    assert status.json()["documents"] == 1
    assert tenant.ingest.delete("/v1/memory/files/MEMORY.md?agent_id=").status_code == 200
    # a value that is there is still checked
    problem(tenant.recall.get("/v1/memory/status?agent_id=no%20spaces"), 422, "agent_id")


def test_another_tenants_session_and_memory_file_are_404(tenant: Tenant, other_tenant: Tenant) -> None:
    tenant.say("secret plans", message_id="s-1")
    history_when(tenant, "agent:main:main", lambda p: bool(p["messages"]))
    assert tenant.ingest.put("/v1/memory/files/MEMORY.md", json={"agent_id": "main", "text": "mine"}).status_code in (
        200,
        201,
    )
    problem(history(other_tenant, "agent:main:main"), 404)
    problem(other_tenant.recall.get("/v1/memory/files/MEMORY.md", params={"agent_id": "main"}), 404)
    problem(other_tenant.ingest.delete("/v1/memory/files/MEMORY.md", params={"agent_id": "main"}), 404)
    assert other_tenant.recall.get("/v1/sessions", params={"agent_id": "main"}).json()["sessions"] == []


def test_session_metadata_as_written(tenant: Tenant, other_tenant: Tenant) -> None:
    """`GET /v1/sessions/{session_key}`: id, status, reset index, token estimate and `memory_flush` with its
    `cycle`, `last_at` and `failures`; another tenant's key is 404."""
    tenant.say("hello there", message_id="meta-1")
    history_when(tenant, "agent:main:main", lambda p: bool(p["messages"]))
    meta = tenant.recall.get("/v1/sessions/agent:main:main", params={"agent_id": "main"})
    assert meta.status_code == 200, meta.text
    body = meta.json()
    assert {"session_id", "status", "reset_index", "window_tokens", "memory_flush"} <= body.keys()
    assert (body["session_key"], body["status"], body["reset_index"]) == ("agent:main:main", "active", 0)
    assert body["window_tokens"] > 0
    flush = body["memory_flush"]
    assert {"cycle", "last_at", "failures"} <= flush.keys()
    assert (flush["cycle"], flush["last_at"], flush["failures"], flush["pending"]) == (None, None, 0, False)
    problem(other_tenant.recall.get("/v1/sessions/agent:main:main"), 404)
    problem(tenant.recall.get("/v1/sessions/agent:main:nobody"), 404)


def test_sessions_are_listed_with_the_documented_filters(tenant: Tenant) -> None:
    tenant.say("direct", message_id="l-1")
    tenant.say("group", chat_type="group", chat_id="g1", channel="telegram", message_id="l-2")

    def listed() -> list[Any] | None:
        params: dict[str, str | int] = {"agent_id": "main", "chat_type": "group", "status": "active", "limit": 1}
        response = tenant.recall.get("/v1/sessions", params=params)
        assert response.status_code == 200, response.text
        sessions: list[Any] = response.json()["sessions"]
        return sessions or None

    [group] = eventually(listed)
    assert group["session_key"] == "agent:main:telegram:group:g1"
    everything = tenant.recall.get("/v1/sessions", params={"agent_id": "main", "limit": 1}).json()
    assert len(everything["sessions"]) == 1
    assert everything["next_cursor"]
    rest = tenant.recall.get("/v1/sessions", params={"agent_id": "main", "cursor": everything["next_cursor"]}).json()
    assert {s["session_key"] for s in everything["sessions"] + rest["sessions"]} == {
        "agent:main:main",
        "agent:main:telegram:group:g1",
    }
    assert rest["next_cursor"] is None


# ---------------------------------------------------------------------------------------------------
# Memory writes and reads


def test_memory_files_are_written_read_listed_and_deleted_as_written(tenant: Tenant) -> None:
    path = "/v1/memory/files/memory/bank/food.md"
    created = tenant.ingest.put(path, json={"agent_id": "main", "text": "# Food\n- 用户不吃辣\n- likes tea\n"})
    assert created.status_code == 201, created.text
    assert {"path", "version", "position"} <= created.json().keys()
    assert created.json()["path"] == "memory/bank/food.md"
    version = created.json()["version"]
    updated = tenant.ingest.put(
        path, json={"agent_id": "main", "text": "# Food\n- 用户不吃辣\n- likes green tea\n"},
        headers={"If-Match": str(version)},
    )  # fmt: skip
    assert updated.status_code == 200, updated.text
    stale = tenant.ingest.put(path, json={"agent_id": "main", "text": "lost"}, headers={"If-Match": str(version)})
    problem(stale, 409)

    read = tenant.recall.get(path, params={"agent_id": "main", "from": 2, "lines": 2})
    assert read.status_code == 200, read.text
    window = read.json()
    assert {k: window[k] for k in ("path", "text", "version", "from", "lines")} == {
        "path": "memory/bank/food.md", "text": "- 用户不吃辣\n- likes green tea\n", "version": version + 1,
        "from": 2, "lines": 2,
    }  # fmt: skip

    daily = tenant.ingest.post("/v1/memory/daily", json={"agent_id": "main", "text": "met Bob", "date": None})
    assert daily.status_code == 201, daily.text
    assert re.fullmatch(r"memory/daily/\d{4}-\d{2}-\d{2}\.md", daily.json()["path"])
    dated = tenant.ingest.post("/v1/memory/daily", json={"agent_id": "main", "text": "flew", "date": "2026-11-01"})
    assert dated.json()["path"] == "memory/daily/2026-11-01.md"

    listing = tenant.recall.get("/v1/memory/files", params={"agent_id": "main", "prefix": "memory/bank/"})
    assert listing.status_code == 200, listing.text
    [entry] = listing.json()["files"]
    assert {"path", "version", "updated_at", "bytes"} <= entry.keys()
    assert (entry["path"], entry["version"]) == ("memory/bank/food.md", version + 1)

    deleted = tenant.ingest.delete(path, params={"agent_id": "main"})
    assert deleted.status_code == 200, deleted.text
    problem(tenant.recall.get(path, params={"agent_id": "main"}), 404)
    problem(tenant.recall.get("/v1/memory/files/MEMORY.md", params={"agent_id": "main"}), 404)


def test_memory_search_and_status_as_written(tenant: Tenant) -> None:
    written = tenant.ingest.put("/v1/memory/files/MEMORY.md", json={"agent_id": "main", "text": "- 用户不吃辣\n"})
    assert written.status_code == 201, written.text
    body = {"agent_id": "main", "query": "用户不吃辣", "limit": 6, "min_score": None, "corpus": "memory",
            "caller_session_key": None}  # fmt: skip

    def found() -> list[Any] | None:
        response = tenant.recall.post("/v1/memory/search", json=body)
        assert response.status_code == 200, response.text
        results: list[Any] = response.json()["results"]
        return results or None

    [hit] = eventually(found)
    fields = {"path", "start_line", "end_line", "score", "snippet", "source", "citation", "message_ids"}
    assert fields <= hit.keys()
    assert (hit["path"], hit["source"], hit["start_line"]) == ("MEMORY.md", "memory", 1)
    assert "用户不吃辣" in hit["snippet"]
    cited = tenant.recall.get(hit["citation"])  # the citation opens the lines the hit was cut from
    assert cited.status_code == 200, cited.text
    assert "用户不吃辣" in cited.json()["text"]
    problem(tenant.recall.post("/v1/memory/search", json={**body, "corpus": "files"}), 422, "corpus")

    status = tenant.recall.get("/v1/memory/status", params={"agent_id": "main"})
    assert status.status_code == 200, status.text
    assert {"backend", "provider", "model", "documents", "chunks", "index_lag_s", "fallbacks"} <= status.json().keys()
    assert status.json()["documents"] == 1


# ---------------------------------------------------------------------------------------------------
# Conventions


@pytest.mark.parametrize(
    ("service", "method", "path"),
    [
        ("ingest", "POST", "/v1/messages"),
        ("ingest", "PUT", "/v1/memory/files/MEMORY.md"),
        ("ingest", "GET", "/v1/agents/main/config"),
        ("recall", "POST", "/v1/sessions/search"),
        ("recall", "GET", "/v1/sessions"),
        ("recall", "POST", "/v1/memory/search"),
        ("recall", "GET", "/v1/memory/status"),
    ],
)
def test_no_or_an_invalid_key_is_401(services: LocalStack, service: str, method: str, path: str) -> None:
    url = f"{services.url(service)}{path}"
    problem(httpx.request(method, url, json={"text": "x", "query": "x"}, timeout=10), 401)
    invalid = {"Authorization": f"Bearer {uuid.uuid4().hex}"}
    problem(httpx.request(method, url, json={"text": "x", "query": "x"}, headers=invalid, timeout=10), 401)


def test_agent_id_defaults_to_main(tenant: Tenant) -> None:
    said = tenant.ingest.post("/v1/messages", json={"text": "default agent"})
    assert said.json()["session_key"] == "agent:main:main"
    assert tenant.ingest.put("/v1/memory/files/MEMORY.md", json={"text": "x"}).status_code == 201
    assert tenant.recall.get("/v1/memory/files/MEMORY.md", params={"agent_id": "main"}).json()["version"] == 1
    assert tenant.recall.get("/v1/memory/files/MEMORY.md").json()["version"] == 1


INGEST_OPERATIONS = {
    ("post", "/v1/messages"), ("post", "/v1/messages/batch"), ("post", "/v1/sessions"),
    ("post", "/v1/sessions/{session_key}/reset"), ("post", "/v1/sessions/{session_key}/fork"),
    ("post", "/v1/admin/tenants"), ("put", "/v1/agents/{agent_id}/config"), ("get", "/v1/agents/{agent_id}/config"),
    ("put", "/v1/memory/files/{path}"), ("post", "/v1/memory/daily"), ("delete", "/v1/memory/files/{path}"),
}  # fmt: skip
RECALL_OPERATIONS = {
    ("post", "/v1/sessions/search"), ("get", "/v1/sessions/{session_key}/history"), ("get", "/v1/sessions"),
    ("post", "/v1/memory/search"), ("get", "/v1/memory/files/{path}"), ("get", "/v1/memory/files"),
    ("get", "/v1/memory/status"), ("get", "/v1/sessions/{session_key}"),
}  # fmt: skip


def test_openapi_describes_every_api_md_operation(services: LocalStack) -> None:
    for service, expected in (("ingest", INGEST_OPERATIONS), ("recall", RECALL_OPERATIONS)):
        spec = httpx.get(f"{services.url(service)}/openapi.json", timeout=10).json()
        served = {(method, path) for path, item in spec["paths"].items() for method in item}
        assert expected <= served, expected - served
