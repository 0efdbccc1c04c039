"""Session history and listing end to end: written through ingest, read back through recall."""

import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import pytest

from cairn.text import mask
from tests.conftest import Tenant

pytestmark = pytest.mark.e2e
TELEGRAM = {"channel": "telegram", "peer_id": "42"}
Params = dict[str, str | int]
T = TypeVar("T")


def say(tenant: Tenant, text: str, **fields: object) -> dict[str, str]:
    """Write as an adapter does, with its own message id, so a redelivery can never store a message twice."""
    return tenant.say(text, **{"message_id": f"m-{uuid.uuid4()}", **fields})


def history(tenant: Tenant, key: str, **params: str | int) -> httpx.Response:
    return tenant.recall.get(f"/v1/sessions/{quote(key, safe=':')}/history", params=params)


def eventually(check: Callable[[], T | None], timeout: float = 20.0) -> T | None:
    """Poll until `check` returns something truthy; bounded, never a fixed sleep."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


def page_when(tenant: Tenant, key: str, ready: Callable[[dict[str, Any]], bool], **params: str | int) -> dict[str, Any]:
    """The history page once the session service has appended what `ready` waits for."""

    last: list[str] = []

    def attempt() -> dict[str, Any] | None:
        response = history(tenant, key, **params)
        last[:] = [response.text]
        if response.status_code == 404:
            return None
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body if ready(body) else None

    page = eventually(attempt)
    assert page is not None, f"history of {key} never became ready; last answer: {last}"
    return page


def texts(page: dict[str, Any]) -> list[str]:
    return [m["text"] for m in page["messages"]]


def sessions_when(tenant: Tenant, ready: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
    def attempt() -> list[dict[str, Any]] | None:
        response = tenant.recall.get("/v1/sessions", params={"limit": 200})
        assert response.status_code == 200, response.text
        sessions: list[dict[str, Any]] = response.json()["sessions"]
        return sessions if ready(sessions) else None

    found = eventually(attempt)
    assert found is not None, "the sessions never appeared"
    return found


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    return body


def test_the_latest_window_is_shown_and_a_message_id_reopens_exactly_its_window(tenant: Tenant) -> None:
    key = tenant.say("first window, one", message_id="w0-a", **TELEGRAM)["session_key"]
    tenant.say("first window, two", role="assistant", message_id="w0-b", **TELEGRAM)
    tenant.say("/new", message_id="reset-1", **TELEGRAM)
    tenant.say("second window", message_id="w1-a", **TELEGRAM)
    tenant.say("/reset", message_id="reset-2", **TELEGRAM)
    tenant.say("third window", message_id="w2-a", **TELEGRAM)

    latest = page_when(tenant, key, lambda p: texts(p) == ["third window"])
    assert latest["window"] == {"reset_index": 2, "has_earlier_windows": True}
    assert (latest["has_more"], latest["next_offset"], latest["truncated"]) == (False, None, False)
    assert latest["bytes"] == len(history(tenant, key).content)

    first = history(tenant, key, message_id="w0-b").json()  # the adapter's id
    assert texts(first) == ["first window, one", "first window, two"]
    assert [m["role"] for m in first["messages"]] == ["user", "assistant"]
    assert first["window"] == {"reset_index": 0, "has_earlier_windows": False}
    assert first["session_id"] == latest["session_id"]  # a reset keeps the id
    assert first["messages"][0]["sender_name"] is None
    assert first["messages"][0]["occurred_at"]
    assert first["messages"][0]["recorded_at"]

    second = history(tenant, key, message_id="w1-a").json()
    assert texts(second) == ["second window"]
    ours = second["messages"][0]["cairn_message_id"]  # cairn's id opens the same window
    assert history(tenant, key, message_id=ours).json()["messages"] == second["messages"]

    missing = problem(history(tenant, key, message_id="never-sent"), 404)
    assert "never-sent" in missing["detail"]


def test_tool_and_system_entries_are_hidden_unless_asked_for(tenant: Tenant) -> None:
    key = say(tenant, "what is the weather in Lisbon?")["session_key"]
    say(tenant, '{"temp_c": 21, "sky": "clear"}', role="tool")
    say(tenant, "you are a helpful agent", role="system")
    say(tenant, "It is 21 °C and clear in Lisbon.", role="assistant")

    everything = page_when(tenant, key, lambda p: len(p["messages"]) == 4, include_tools="true")
    assert [m["role"] for m in everything["messages"]] == ["user", "tool", "system", "assistant"]
    shown = history(tenant, key).json()
    assert texts(shown) == ["what is the weather in Lisbon?", "It is 21 °C and clear in Lisbon."]


def test_paging_backwards_returns_every_message_exactly_once(tenant: Tenant) -> None:
    batch = [
        {"text": f"line {i:02d}", "role": "user" if i % 2 else "assistant", "message_id": f"line-{i}"}
        for i in range(23)
    ]
    accepted = tenant.ingest.post("/v1/messages/batch", json={"messages": batch})
    assert accepted.status_code == 202, accepted.text
    key = accepted.json()["results"][0]["session_key"]
    page_when(tenant, key, lambda p: len(p["messages"]) == 23)

    seen: list[str] = []
    offset: int | None = 0
    pages = 0
    while offset is not None:
        page = history(tenant, key, limit=5, offset=offset).json()
        positions = [m["position"] for m in page["messages"]]
        assert positions == sorted(positions)  # chronological within a page
        seen = texts(page) + seen
        offset = page["next_offset"]
        assert page["has_more"] is (offset is not None)
        pages += 1
    assert seen == [f"line {i:02d}" for i in range(23)]
    assert pages == 5


def test_long_texts_are_capped_and_secrets_are_redacted(tenant: Tenant) -> None:
    openai_key = "sk-" + "Ab3dEf6hIj" * 4
    bearer = "abc" + "9Zy8Xw7Vu6" * 3
    key = say(tenant, "x" * 5000)["session_key"]
    say(tenant, f"my key is {openai_key} and the header was Authorization: Bearer {bearer} ok", role="assistant")

    page = page_when(tenant, key, lambda p: len(p["messages"]) == 2)
    long, secret = page["messages"]
    assert long["text"] == "x" * 4000
    assert long["truncated"] is True
    assert page["truncated"] is True
    assert secret["truncated"] is False
    assert openai_key not in secret["text"]
    assert bearer not in secret["text"]
    assert "9Zy8Xw7Vu6" not in secret["text"]
    assert secret["text"] == f"my key is {mask(openai_key)} and the header was Authorization: Bearer {mask(bearer)} ok"


def test_unknown_keys_other_tenants_keys_and_other_session_ids_are_404(tenant: Tenant, other_tenant: Tenant) -> None:
    key = say(tenant, "only mine")["session_key"]
    page = page_when(tenant, key, lambda p: len(p["messages"]) == 1)

    problem(history(other_tenant, key), 404)  # not 403: nothing confirms that the key exists
    problem(history(tenant, "agent:main:telegram:direct:nobody"), 404)
    problem(history(tenant, key, agent_id="other"), 404)
    earlier = problem(history(tenant, key, session_id=str(uuid.uuid4())), 404)
    assert "never had the id" in earlier["detail"]
    assert history(tenant, key, session_id=page["session_id"]).status_code == 200


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 201}, "limit"),
        ({"offset": -1}, "offset"),
        ({"session_id": "not-a-uuid"}, "session_id"),
        ({"include_tools": "perhaps"}, "include_tools"),
    ],
)
def test_bad_history_parameters_are_422_naming_the_field(tenant: Tenant, params: Params, field: str) -> None:
    body = problem(history(tenant, "agent:main:main", **params), 422)
    assert [e["field"] for e in body["errors"]] == [field]


def test_sessions_are_listed_with_counts_and_filtered_by_chat_type(tenant: Tenant, other_tenant: Tenant) -> None:
    direct = say(tenant, "hello there", **TELEGRAM)["session_key"]
    say(tenant, "hi!", role="assistant", **TELEGRAM)
    group = say(tenant, "team standup at 10", channel="slack", chat_type="group", chat_id="g1")["session_key"]
    assert group == "agent:main:slack:group:g1"

    listed = sessions_when(tenant, lambda s: {x["session_key"]: x["message_count"] for x in s} == {direct: 2, group: 1})
    assert [s["session_key"] for s in listed] == [group, direct]  # newest updated first
    entry = listed[0]
    assert (entry["chat_type"], entry["channel"], entry["status"]) == ("group", "slack", "active")
    assert entry["compaction_count"] == 0
    assert entry["parent_session_id"] is None
    assert entry["window_tokens"] > 0
    assert entry["session_id"] == history(tenant, group).json()["session_id"]

    groups = tenant.recall.get("/v1/sessions", params={"chat_type": "group"}).json()
    assert [s["session_key"] for s in groups["sessions"]] == [group]
    assert groups["next_cursor"] is None
    active = tenant.recall.get("/v1/sessions", params={"status": "active"}).json()["sessions"]
    assert len(active) == 2
    assert tenant.recall.get("/v1/sessions", params={"status": "archived"}).json()["sessions"] == []
    later = tenant.recall.get("/v1/sessions", params={"updated_since": "2999-01-01T00:00:00+00:00"}).json()
    assert later["sessions"] == []
    assert other_tenant.recall.get("/v1/sessions").json() == {"sessions": [], "next_cursor": None, "indexing": False}


def test_the_cursor_pages_through_sessions_without_duplicates(tenant: Tenant) -> None:
    keys = {
        say(tenant, f"group {i}", channel="slack", chat_type="group", chat_id=f"g{i}")["session_key"] for i in range(7)
    }
    sessions_when(tenant, lambda s: {x["session_key"] for x in s} == keys)

    seen: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: Params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = tenant.recall.get("/v1/sessions", params=params).json()
        seen += page["sessions"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(s["session_key"] for s in seen) == sorted(keys)
    assert len(seen) == len(keys)
    order = [(s["updated_at"], s["session_key"]) for s in seen]
    assert order == sorted(order, reverse=True)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"chat_type": "telepathy"}, "chat_type"),
        ({"status": "sleeping"}, "status"),
        ({"updated_since": "yesterday"}, "updated_since"),
        ({"updated_since": "2026-11-29T09:30:00"}, "updated_since"),
        ({"limit": 201}, "limit"),
        ({"cursor": "bm90IGEgY3Vyc29y"}, "cursor"),
    ],
)
def test_bad_listing_parameters_are_422_naming_the_field(tenant: Tenant, params: Params, field: str) -> None:
    body = problem(tenant.recall.get("/v1/sessions", params=params), 422)
    assert [e["field"] for e in body["errors"]] == [field]


def test_incognito_sessions_are_never_listed_and_unknown_ones_never_read(tenant: Tenant) -> None:
    created = tenant.ingest.post("/v1/sessions", json={"incognito": True})
    assert created.status_code == 201, created.text
    say(tenant, "do not keep this", session_key=created.json()["session_key"])
    marker = say(tenant, "keep this")["session_key"]
    sessions = sessions_when(tenant, lambda s: any(x["session_key"] == marker for x in s))
    assert [s["session_key"] for s in sessions] == [marker]
    problem(history(tenant, f"agent:main:dashboard:incognito-{uuid.uuid4()}"), 404)


def test_openapi_describes_history_and_listing(tenant: Tenant) -> None:
    spec = tenant.recall.get("/openapi.json").json()
    history_op = spec["paths"]["/v1/sessions/{session_key}/history"]["get"]
    assert history_op["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/HistoryPage"
    }
    assert "/v1/sessions" in spec["paths"]
    page = spec["components"]["schemas"]["HistoryPage"]["properties"]
    assert {"session_key", "session_id", "messages", "window", "truncated", "has_more", "next_offset", "bytes"} <= set(
        page
    )
    listed = spec["components"]["schemas"]["SessionSummary"]["properties"]
    assert {"compaction_count", "parent_session_id", "message_count", "window_tokens"} <= set(listed)
