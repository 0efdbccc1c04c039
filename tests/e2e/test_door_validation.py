"""Issue 28 on the running stack: what cannot be stored is refused at the door with a 422 naming the field
and the limit (never 202-then-lost, never a 500); what is accepted, extreme but valid, is applied by the
session service and both indexes and never dead-lettered; an event that bypassed the door is dead-lettered
with its reason and stops nobody; a turn stored as `-infinity` by an older release stops nobody either."""

import asyncio
import json
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import asyncpg
import httpx
import nats
import pytest

from cairn.events import (
    DEAD_LETTER_STREAM,
    INGEST_STREAM,
    AgentConfig,
    AgentConfigured,
    MemoryWriteRequested,
    MessageReceived,
    inbound_subject,
    subject_for,
)
from cairn.events.agents import MAX_CONTEXT_WINDOW
from cairn.events.models import InboundMessage
from cairn.local import LocalStack
from tests.conftest import Tenant
from tests.streams import stream_messages

pytestmark = pytest.mark.e2e
PROBLEM_JSON = "application/problem+json"


def raw_json(body: Any) -> bytes:
    """JSON as an adapter may send it: lone surrogates as `\\ud800` escapes (httpx's `json=` cannot encode them)."""
    return json.dumps(body).encode()


def refused(response: httpx.Response, field: str, *words: str) -> None:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM_JSON
    errors = response.json()["errors"]
    assert field in [e["field"] for e in errors], errors
    message = next(e["message"] for e in errors if e["field"] == field)
    assert all(word in message for word in words), message


async def _letters(stack: LocalStack, marker: str) -> list[tuple[str, str]]:
    """(dead-letter subject, reason) of every dead letter whose event or subject contains `marker`."""
    nc = await nats.connect(stack.nats_url)
    try:
        letters = await stream_messages(nc.jetstream(), DEAD_LETTER_STREAM, "cairn-dead-letter.>")
    finally:
        await nc.close()
    # a letter parked without its data (what must never be stored) still names its subject, tenant included
    return [
        (m.subject or "", (m.headers or {}).get("Cairn-Error", ""))
        for m in letters
        if marker.encode() in (m.data or b"") or marker in (m.headers or {}).get("Cairn-Subject", "")
    ]


def _dead_letters(stack: LocalStack, marker: str, by: str | None = None) -> list[str]:
    """Reasons of the dead letters (of consumer `by` or its partitions, or of any) whose event contains `marker`."""
    letters = asyncio.run(_letters(stack, marker))
    consumer = re.compile(rf"cairn-dead-letter\.{by}(-p[0-9]+)?\.[^.]+" if by else r".*")
    return [reason for subject, reason in letters if consumer.fullmatch(subject)]


def eventually(probe: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    found = probe()
    while not found and time.monotonic() < deadline:
        time.sleep(0.1)
        found = probe()
    return found


@pytest.mark.parametrize(
    ("occurred_at", "words"),
    [
        ("0001-01-01T00:00:00Z", ("1900",)),  # was 202, stored as -infinity, and stopped the memory index
        ("9999-12-31T23:59:59-14:00", ("9999",)),  # was 202, then dead-lettered: lost
        ("9999-12-31T23:59:59.999999Z", ("9999",)),  # asyncpg's infinity
        ("1899-12-31T23:59:59Z", ("1900",)),
        (1764408600, ("RFC 3339",)),  # an integer epoch
        ("2026-11-29T09:30:00", ("UTC offset",)),
    ],
)
def test_a_time_that_cannot_be_stored_is_refused(tenant: Tenant, occurred_at: Any, words: tuple[str, ...]) -> None:
    marker = uuid.uuid4().hex
    response = tenant.ingest.post("/v1/messages", json={"text": f"when {marker}", "occurred_at": occurred_at})
    refused(response, "occurred_at", *words)
    assert tenant.search(marker)["results"] == []


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("text", "nul \x00 inside", ("U+0000", "character 5")),
        ("peer_id", "U\x001", ("U+0000",)),
        ("message_id", "m\x00", ("U+0000",)),
        ("sender_name", "Ada\x00", ("U+0000",)),
        # FastAPI's JSON parser already refuses these in a single message; the batch is parsed otherwise
        ("text", "lone \ud800 surrogate", ()),
        ("peer_id", "\udfff", ()),
    ],
)
def test_a_message_with_a_nul_or_a_lone_surrogate_is_refused(
    services: LocalStack, tenant: Tenant, field: str, value: str, words: tuple[str, ...]
) -> None:
    marker = uuid.uuid4().hex
    body = {"text": f"message {marker}", "channel": "telegram", field: value}
    if field == "text":
        body["message_id"] = marker
    single = tenant.ingest.post("/v1/messages", content=raw_json(body), headers={"content-type": "application/json"})
    refused(single, field, *words)
    batch = tenant.ingest.post(
        "/v1/messages/batch",
        content=raw_json({"messages": [body, {"text": f"fine {marker}"}]}),
        headers={"content-type": "application/json"},
    )
    assert batch.status_code == 202, batch.text
    first, second = batch.json()["results"]
    assert first["error"]["status"] == 422
    assert field in [e["field"] for e in first["error"]["errors"]]
    hits = tenant.search(marker, consistent_with=second["position"])["results"]
    assert isinstance(hits, list)
    assert [h["snippet"] for h in hits] == [f"fine {marker}"]
    assert _dead_letters(services, marker) == []


@pytest.fixture
def talked(tenant: Tenant) -> Tenant:
    """A tenant whose main session exists (so that reads and forks get past their 404)."""
    said = tenant.say("hello there", message_id="first")
    assert tenant.search("hello", consistent_with=said["position"])["results"]
    return tenant


ADMIN = "admin"
REQUESTS: list[tuple[str, str, str, dict[str, Any], str]] = [
    # (service, method, url, request arguments, field)
    ("ingest", "POST", "/v1/admin/tenants", {"content": raw_json({"name": "acme\x00"})}, "name"),
    ("ingest", "POST", "/v1/admin/tenants", {"content": raw_json({"name": "acme\ud800"})}, "name"),
    ("ingest", "PUT", "/v1/agents/main/config",
     {"content": raw_json({"identity_links": {"ann\x00": ["telegram:1"]}})}, "identity_links.ann\x00.[key]"),
    ("ingest", "PUT", "/v1/agents/main/config",
     {"content": raw_json({"identity_links": {"ann": ["telegram:\ud800"]}})}, "identity_links.ann.0"),
    ("ingest", "POST", "/v1/sessions/agent:main:main/fork", {"content": raw_json({"from_message_id": "x\x00"})},
     "from_message_id"),
    ("recall", "GET", "/v1/sessions/agent:main:main/history", {"params": {"message_id": "x\x00"}}, "message_id"),
    ("recall", "GET", "/v1/memory/files", {"params": {"prefix": "memory/\x00"}}, "prefix"),
    ("recall", "GET", "/v1/memory/files/MEMORY%00.md", {}, "path"),
    ("recall", "GET", "/v1/memory/versions/MEMORY%00.md", {}, "path"),
    ("recall", "POST", "/v1/sessions/search",
     {"content": raw_json({"query": "hello", "caller_session_key": "agent:main:\x00"})}, "caller_session_key"),
    ("recall", "POST", "/v1/memory/search",
     {"content": raw_json({"query": "hello", "caller_session_key": "agent:\x00", "corpus": "all"})},
     "caller_session_key"),
    ("recall", "POST", "/v1/sessions/search", {"content": raw_json({"query": "hello \ud800"})}, "query"),
    ("recall", "POST", "/v1/sessions/search", {"content": raw_json({"query": "hello \x00"})}, "query"),
    ("recall", "POST", "/v1/memory/search", {"content": raw_json({"query": "hello \x00", "corpus": "all"})}, "query"),
    ("recall", "GET", "/v1/sessions", {"params": {"updated_since": "0001-01-01T00:00:00+01:00"}}, "updated_since"),
    ("ingest", "POST", "/v1/sessions", {"content": raw_json({"parent_session_key": "agent:\ud800"})},
     "parent_session_key"),
    ("ingest", "PUT", "/v1/memory/files/MEMORY.md", {"content": raw_json({"text": "# a\ud800"})}, "text"),
]  # fmt: skip


@pytest.mark.parametrize(("service", "method", "url", "arguments", "field"), REQUESTS)
def test_nul_and_lone_surrogates_are_a_422_on_every_endpoint_never_a_500(
    services: LocalStack, talked: Tenant, service: str, method: str, url: str, arguments: dict[str, Any], field: str
) -> None:
    client = talked.ingest if service == "ingest" else talked.recall
    headers = {"content-type": "application/json"}
    if url.startswith("/v1/admin"):
        headers["authorization"] = f"Bearer {services.state.admin_token}"
    response = client.request(method, url, headers=headers, **arguments)
    refused(response, field)


def test_if_match_beyond_a_stored_version_is_refused(talked: Tenant) -> None:
    response = talked.ingest.put("/v1/agents/main/config", json={}, headers={"If-Match": f'"{2**31}"'})
    refused(response, "If-Match")
    response = talked.ingest.put("/v1/memory/files/MEMORY.md", json={"text": "x"}, headers={"If-Match": "9" * 30})
    refused(response, "If-Match")


async def _agent_window(stack: LocalStack, tenant_id: str) -> int | None:
    conn = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        window: int | None = await conn.fetchval(
            "SELECT context_window FROM session.agent_settings WHERE tenant_id = $1 AND agent_id = 'main'",
            uuid.UUID(tenant_id),
        )
        return window
    finally:
        await conn.close()


def test_a_context_window_the_session_service_cannot_apply_is_refused_and_the_largest_is_applied(
    services: LocalStack, tenant: Tenant
) -> None:
    refused(tenant.ingest.put("/v1/agents/main/config", json={"context_window": 1e30}), "context_window", "100000000")
    assert tenant.ingest.get("/v1/agents/main/config").headers["ETag"] == '"0"'  # nothing stored or announced
    largest = tenant.ingest.put("/v1/agents/main/config", json={"context_window": MAX_CONTEXT_WINDOW})
    assert largest.status_code == 200, largest.text
    assert eventually(lambda: asyncio.run(_agent_window(services, tenant.tenant_id)) == MAX_CONTEXT_WINDOW)
    assert _dead_letters(services, tenant.tenant_id) == []


EXTREMES = [
    ("emoji 🦀🧗‍♀️ crab climber", "1900-01-01T00:00:00Z", "🦀 Ferris"),
    ("中文测试 上海 extremum", "1900-01-01T08:00:00+08:00", "李伟"),
    ("last second of the calendar", "9999-12-31T23:59:59Z", None),
    ("tabs\tand\nline\r\nbreaks kept", "9999-12-31T23:59:59.999998+00:00", "Zoë"),
]


def test_extreme_but_valid_messages_are_stored_found_and_never_dead_lettered(
    services: LocalStack, tenant: Tenant
) -> None:
    positions = []
    for index, (text, occurred_at, sender) in enumerate(EXTREMES):
        body = {"text": text, "occurred_at": occurred_at, "sender_name": sender, "message_id": f"x-{index}"}
        assert InboundMessage.model_validate(body)  # the same model the door uses
        positions.append(int(tenant.say(**body)["position"]))  # type: ignore[arg-type]
    last = str(max(positions))
    for query in ("crab", "上海", "calendar", "breaks"):
        hits = tenant.search(query, consistent_with=last)["results"]
        assert isinstance(hits, list)
        assert len(hits) == 1, (query, hits)
    history = tenant.recall.get("/v1/sessions/agent:main:main/history", params={"consistent_with": last}).json()
    assert sorted(m["occurred_at"] for m in history["messages"]) == [
        "1900-01-01T00:00:00Z", "1900-01-01T00:00:00Z", "9999-12-31T23:59:59.999998Z", "9999-12-31T23:59:59Z",
    ]  # fmt: skip
    memory = tenant.recall.post(
        "/v1/memory/search", json={"query": "crab climber", "corpus": "sessions", "consistent_with": last}
    ).json()
    assert memory["indexing"] is False
    assert any("crab" in hit["snippet"] for hit in memory["results"])
    assert _dead_letters(services, tenant.tenant_id) == []


async def _publish_raw(stack: LocalStack, subject: str, data: bytes) -> None:
    nc = await nats.connect(stack.nats_url)
    try:
        await nc.jetstream().publish(subject, data, stream=INGEST_STREAM)
    finally:
        await nc.close()


def test_events_that_bypassed_the_door_are_dead_lettered_with_the_reason_and_stop_nobody(
    services: LocalStack, tenant: Tenant
) -> None:
    marker = uuid.uuid4().hex
    good = MessageReceived(
        tenant_id=tenant.tenant_id, session_key="agent:main:main", message=InboundMessage(text=f"ok {marker}")
    )
    bad = good.model_dump(mode="json")
    bad["message"]["text"] = f"bad\x00 {marker}"
    asyncio.run(_publish_raw(services, subject_for(good), json.dumps(bad).encode()))
    write = MemoryWriteRequested(tenant_id=tenant.tenant_id, path="MEMORY.md", mode="put", text=marker)
    bad_write = write.model_dump(mode="json") | {"text": f"{marker}\x00"}
    asyncio.run(_publish_raw(services, subject_for(write), json.dumps(bad_write).encode()))

    # every consumer of the ingest stream refuses what it cannot decode; these two are the ones that apply them
    for event_id, consumer in ((good.event_id, "session"), (write.event_id, "consolidation")):
        reasons = eventually(lambda: _dead_letters(services, event_id, consumer))  # noqa: B023
        assert len(reasons) == 1, (consumer, asyncio.run(_letters(services, marker)))
        assert "undecodable event" in reasons[0]
        assert "U+0000" in reasons[0]
    # the session service and consolidation go on: this tenant's next message and write are applied
    configured = AgentConfigured(tenant_id=tenant.tenant_id, version=1, config=AgentConfig())
    huge = configured.model_dump(mode="json")
    huge["config"]["context_window"] = 10**12
    asyncio.run(_publish_raw(services, subject_for(configured), json.dumps(huge).encode()))
    reasons = eventually(lambda: _dead_letters(services, configured.event_id, "session"))
    assert len(reasons) == 1
    assert "less than or equal to 100000000" in reasons[0]
    said = tenant.say(f"after {marker}")
    hits = tenant.search(marker, consistent_with=said["position"])["results"]
    assert isinstance(hits, list)
    assert [h["snippet"] for h in hits] == [f"after {marker}"]
    assert tenant.ingest.put("/v1/memory/files/MEMORY.md", json={"text": "# fine\n"}).status_code == 201


async def _stored_as_minus_infinity(stack: LocalStack, tenant_id: str, words: str) -> int:
    """What a release before issue 28 stored for 0001-01-01T00:00:00Z, written as it would have been."""
    conn = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        done: str = await conn.execute(
            "UPDATE indexer.memory_turns SET occurred_at = '-infinity' WHERE tenant_id = $1 AND text LIKE $2",
            uuid.UUID(tenant_id), f"%{words}%",
        )  # fmt: skip
        return int(done.split()[-1])
    finally:
        await conn.close()


def test_a_turn_stored_as_minus_infinity_stops_neither_the_memory_worker_nor_readiness(
    services: LocalStack, tenant: Tenant
) -> None:
    tenant.say("the harbour walk was lovely")
    second = tenant.say("we saw the lighthouse too")
    indexed = tenant.recall.post(
        "/v1/memory/search", json={"query": "lighthouse", "corpus": "sessions", "consistent_with": second["position"]}
    ).json()
    assert indexed["indexing"] is False
    assert asyncio.run(_stored_as_minus_infinity(services, tenant.tenant_id, "harbour walk")) == 1
    third = tenant.say("and then the seagulls stole our chips")
    found = tenant.recall.post(
        "/v1/memory/search",
        json={"query": "seagulls chips", "corpus": "sessions", "consistent_with": third["position"]},
    ).json()
    assert found["indexing"] is False
    assert any("seagulls" in hit["snippet"] for hit in found["results"])
    assert httpx.get(f"{services.url('indexer')}/readyz", timeout=10).status_code == 200


async def _publish_inbound(stack: LocalStack, tenant_id: str, data: bytes) -> None:
    nc = await nats.connect(stack.nats_url)
    try:
        await nc.jetstream().publish(inbound_subject(tenant_id), data)
    finally:
        await nc.close()


def test_an_adapter_publishing_on_nats_gets_the_same_refusal_as_a_dead_letter_of_ingest(
    services: LocalStack, tenant: Tenant
) -> None:
    marker = uuid.uuid4().hex
    body = {"text": f"inbound {marker}", "peer_id": "U\x001", "occurred_at": "0001-01-01T00:00:00Z"}
    asyncio.run(_publish_inbound(services, tenant.tenant_id, raw_json(body)))
    reasons = eventually(lambda: _dead_letters(services, marker, "ingest"))
    assert len(reasons) == 1
    assert "U+0000" in reasons[0]
    assert "1900" in reasons[0]
    assert _dead_letters(services, marker, "session") == []  # refused at the door, never published


def test_the_largest_accepted_texts_are_indexed_word_for_word_and_never_dead_lettered(
    services: LocalStack, tenant: Tenant
) -> None:
    """At the byte limit (64 KiB in UTF-8): 21,845 CJK characters whose every bigram is distinct (the most
    lexemes a text can make), 6,553 distinct Latin words, 16,384 four-byte emoji; names at their 256."""
    cjk = "".join(chr(0x4E00 + i) for i in range(21_845))
    latin = " ".join(f"w{i:07d}x" for i in range(6_553))
    emoji = "🦀" * 16_384
    assert [len(t.encode()) for t in (cjk, latin, emoji)] == [65_535, 65_529, 65_536]
    name = "名" * 256
    said = [tenant.say(text, sender_name=name, message_id=f"big-{i}") for i, text in enumerate((cjk, latin, emoji))]
    last = str(max(int(s["position"]) for s in said))
    middle = cjk[10_000:10_002]
    for query in (middle, "w0003000x"):
        hits = tenant.search(query, consistent_with=last)["results"]
        assert isinstance(hits, list)
        assert len(hits) == 1, query

    def memory() -> dict[str, Any]:
        body = {"query": "w0003000x", "corpus": "sessions", "consistent_with": last}
        found: dict[str, Any] = tenant.recall.post("/v1/memory/search", json=body).json()
        return found

    # 192 KiB of transcript takes the memory index longer than one search's wait (about 10 s here)
    assert eventually(lambda: not memory()["indexing"], timeout=60)  # it chunked all three
    assert memory()["results"]
    history = tenant.recall.get("/v1/sessions/agent:main:main/history", params={"consistent_with": last}).json()
    assert len(history["messages"]) == 3
    assert _dead_letters(services, tenant.tenant_id) == []
