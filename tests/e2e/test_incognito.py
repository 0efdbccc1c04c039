"""Incognito threads end to end: readable through history while they live, and never anywhere else —
no Postgres row, no JetStream message, no search hit, no listing, no compaction-imminent — across
ingest and recall replicas, and gone once Redis (which holds them, without persistence) restarts."""

import asyncio
import re
import time
import uuid
from typing import Any

import asyncpg
import httpx
import nats
import pytest

from cairn.events import SESSION_STREAM, CompactionImminent, decode_event
from cairn.local import LocalStack
from cairn.local.processes import stop_pid
from tests.conftest import Tenant
from tests.streams import every_stream_message, stream_messages

pytestmark = pytest.mark.e2e

INCOGNITO_KEY = re.compile(
    r"agent:main:dashboard:incognito-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}"
)
# ~250 tokens: with the test stack's 2000-token window (threshold 200) one such message crosses it
LONG = "We compared three vendors on price, support hours and data residency in detail. " * 12


def _start(client: httpx.Client, **fields: Any) -> dict[str, str]:
    created = client.post("/v1/sessions", json={"incognito": True, **fields})
    assert created.status_code == 201, created.text
    body: dict[str, str] = created.json()
    assert INCOGNITO_KEY.fullmatch(body["session_key"]), body
    return body


def _say(client: httpx.Client, key: str, text: str, **fields: Any) -> dict[str, str]:
    response = client.post("/v1/messages", json={"text": text, "session_key": key, **fields})
    assert response.status_code == 202, response.text
    body: dict[str, str] = response.json()
    assert body["session_key"] == key
    return body


def _history(client: httpx.Client, key: str, **params: Any) -> dict[str, Any]:
    response = client.get(f"/v1/sessions/{key}/history", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def _rows_holding(stack: LocalStack, needles: list[str]) -> dict[str, int]:
    """Every base table of every schema, read as a superuser (past row-level security), for any needle."""
    conn = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        tables = await conn.fetch(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')"
        )
        assert len(tables) > 10, "the scan must see the services' tables"
        found: dict[str, int] = {}
        for table in tables:
            name = f'"{table["table_schema"]}"."{table["table_name"]}"'
            for needle in needles:
                count = await conn.fetchval(f"SELECT count(*) FROM {name} t WHERE t::text LIKE $1", f"%{needle}%")
                if count:
                    found[f"{name} {needle}"] = count
        return found
    finally:
        await conn.close()


async def _stream_hits(stack: LocalStack, needles: list[str]) -> dict[str, int]:
    nc = await nats.connect(stack.nats_url)
    try:
        streams = await every_stream_message(nc.jetstream())
    finally:
        await nc.close()
    assert sum(len(messages) for messages in streams.values()) > 0, "the scan must see the streams' messages"
    return {
        f"{stream} {needle}": hits
        for stream, messages in streams.items()
        for needle in needles
        if (hits := sum(needle.encode() in m for m in messages))
    }


async def _compaction_keys(stack: LocalStack, tenant_id: str) -> list[str]:
    nc = await nats.connect(stack.nats_url)
    try:
        subject = f"cairn.{tenant_id}.main.session.compaction-imminent"
        events = [decode_event(m.data or b"") for m in await stream_messages(nc.jetstream(), SESSION_STREAM, subject)]
    finally:
        await nc.close()
    return [e.session_key for e in events if isinstance(e, CompactionImminent)]


def test_an_incognito_thread_is_readable_and_nowhere_else(services: LocalStack, tenant: Tenant) -> None:
    secret = f"zebracode{uuid.uuid4().hex[:12]}"
    created = _start(tenant.ingest)
    key = created["session_key"]
    first = _say(tenant.ingest, key, f"my {secret} is private", message_id="i1", sender_name="Ann")
    again = _say(tenant.ingest, key, f"my {secret} is private", message_id="i1")  # a retry: stored once
    assert again["position"] == first["position"] == "1"
    _say(tenant.ingest, key, f"noted, {secret}", role="assistant", message_id="i2")
    _say(tenant.ingest, key, "lookup result", role="tool", message_id="i3")
    _say(tenant.ingest, key, "/new", message_id="i4")
    batch = tenant.ingest.post(
        "/v1/messages/batch",
        json={"messages": [{"text": f"{LONG} {secret}", "session_key": key, "message_id": f"i{n}"} for n in (5, 6)]},
    )
    assert batch.status_code == 202, batch.text
    assert [r["position"] for r in batch.json()["results"]] == ["5", "6"]  # after the boundary at 4

    latest = _history(tenant.recall, key)
    assert latest["session_id"] == created["session_id"]
    assert [m["position"] for m in latest["messages"]] == [5, 6]
    assert latest["window"] == {"reset_index": 1, "has_earlier_windows": True}
    earlier = _history(tenant.recall, key, message_id="i1", include_tools=True)
    assert [(m["position"], m["role"]) for m in earlier["messages"]] == [(1, "user"), (2, "assistant"), (3, "tool")]
    assert earlier["messages"][0]["sender_name"] == "Ann"
    assert earlier["messages"][0]["text"] == f"my {secret} is private"
    assert _history(tenant.recall, key, limit=1)["next_offset"] == 1

    # a persisted session of the same tenant, as long: it does get compaction-imminent
    persisted = tenant.say(f"{LONG} persisted", message_id="p1")
    assert tenant.search(secret, consistent_with=persisted["position"])["results"] == []
    assert tenant.search(secret, caller_session_key=key, visibility="all")["results"] == []
    listed = tenant.recall.get("/v1/sessions", params={"limit": 200}).json()["sessions"]
    assert [s["session_key"] for s in listed] == ["agent:main:main"]
    deadline = time.monotonic() + 10
    while not asyncio.run(_compaction_keys(services, tenant.tenant_id)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert asyncio.run(_compaction_keys(services, tenant.tenant_id)) == ["agent:main:main"]

    needles = [secret, key.rsplit("incognito-", 1)[1], created["session_id"]]
    assert asyncio.run(_rows_holding(services, needles)) == {}
    assert asyncio.run(_stream_hits(services, needles)) == {}


def test_unknown_ended_and_other_tenants_incognito_threads_are_404(tenant: Tenant, other_tenant: Tenant) -> None:
    never = f"agent:main:dashboard:incognito-{uuid.uuid4()}"
    posted = tenant.ingest.post("/v1/messages", json={"text": "hello", "session_key": never})
    assert posted.status_code == 404, posted.text
    assert "incognito" in posted.json()["detail"]
    assert tenant.recall.get(f"/v1/sessions/{never}/history").status_code == 404
    assert tenant.ingest.post(f"/v1/sessions/{never}/reset", json={}).status_code == 404

    key = _start(tenant.ingest)["session_key"]
    _say(tenant.ingest, key, "mine")
    assert other_tenant.recall.get(f"/v1/sessions/{key}/history").status_code == 404
    assert other_tenant.ingest.post("/v1/messages", json={"text": "x", "session_key": key}).status_code == 404
    assert tenant.recall.get(f"/v1/sessions/{key}/history", params={"agent_id": "ops"}).status_code == 404
    assert tenant.recall.get(f"/v1/sessions/{key}/history", params={"session_id": str(uuid.uuid4())}).status_code == 404

    reset = tenant.ingest.post(f"/v1/sessions/{key}/reset", json={"reason": "api"})
    assert (reset.status_code, reset.json()["position"]) == (202, "2")
    assert _history(tenant.recall, key)["messages"] == []

    fork = tenant.ingest.post(f"/v1/sessions/{key}/fork", json={})
    assert fork.status_code == 422, fork.text
    assert [e["field"] for e in fork.json()["errors"]] == ["session_key"]
    as_fork = tenant.ingest.post("/v1/sessions", json={"incognito": True, "fork": True, "parent_session_key": key})
    assert as_fork.status_code == 422, as_fork.text
    assert [e["field"] for e in as_fork.json()["errors"]] == ["fork"]


def test_incognito_threads_are_shared_by_ingest_and_recall_replicas(services: LocalStack, tenant: Tenant) -> None:
    replicas = [services.add_replica("ingest"), services.add_replica("recall")]
    for name in replicas:
        services.start_service(name)
    try:
        for name in replicas:
            services.wait_ready(name)
        headers = dict(tenant.ingest.headers)
        with (
            httpx.Client(base_url=services.url(replicas[0]), headers=headers, timeout=30) as ingest_2,
            httpx.Client(base_url=services.url(replicas[1]), headers=headers, timeout=30) as recall_2,
        ):
            key = _start(ingest_2)["session_key"]
            positions = [
                int(_say(client, key, f"turn {i}")["position"])
                for i, client in enumerate([tenant.ingest, ingest_2] * 10)
            ]
            assert positions == list(range(1, 21))
            one, two = _history(tenant.recall, key), _history(recall_2, key)
            assert one["messages"] == two["messages"]
            assert [m["text"] for m in one["messages"]] == [f"turn {i}" for i in range(20)]
    finally:
        for name in replicas:
            stop_pid(services.state.pids.pop(name, None))


def test_incognito_threads_are_gone_after_redis_restarts(services: LocalStack, tenant: Tenant) -> None:
    key = _start(tenant.ingest)["session_key"]
    _say(tenant.ingest, key, "forget me")
    assert [m["text"] for m in _history(tenant.recall, key)["messages"]] == ["forget me"]

    services.restart_redis()

    assert tenant.recall.get(f"/v1/sessions/{key}/history").status_code == 404
    assert tenant.ingest.post("/v1/messages", json={"text": "still there?", "session_key": key}).status_code == 404
    # the rest of cairn carries on: persisted sessions are written and found again
    for service in ("ingest", "session", "indexer", "recall", "consolidation"):
        services.wait_ready(service)
    kept = tenant.say("persisted after the restart", message_id="after-restart")
    found = tenant.search("restart", consistent_with=kept["position"])
    assert found["indexing"] is False
    assert isinstance(found["results"], list)
    assert found["results"]
