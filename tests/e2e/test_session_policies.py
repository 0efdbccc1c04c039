"""Per-agent session policies end to end: group_scope routing, a reset policy per chat type, retention
(dormant, then archived) per agent — archived sessions stay readable and searchable — and compaction
thresholds per agent."""

import asyncio
import time
from datetime import timedelta
from typing import Any

import asyncpg
import nats
import pytest

from cairn.events import SESSION_STREAM, CompactionImminent, decode_event
from cairn.local import LocalStack
from cairn.session.lifecycle import LifecycleSweeper
from tests.conftest import Tenant
from tests.streams import stream_messages

pytestmark = pytest.mark.e2e


def _configure(tenant: Tenant, agent: str = "main", **config: Any) -> None:
    response = tenant.ingest.put(f"/v1/agents/{agent}/config", json=config)
    assert response.status_code == 200, response.text


def _history(tenant: Tenant, key: str, **params: str) -> dict[str, Any]:
    response = tenant.recall.get(f"/v1/sessions/{key}/history", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_group_scope_per_member_gives_each_member_a_session_of_their_own(tenant: Tenant) -> None:
    group = {"channel": "telegram", "chat_type": "group", "chat_id": "-42"}
    alice = tenant.say("group default from alice", peer_id="1", **group)
    bob = tenant.say("group default from bob", peer_id="2", **group)
    assert alice["session_key"] == bob["session_key"] == "agent:main:telegram:group:-42"

    _configure(tenant, group_scope="per-member", identity_links={"alice": ["telegram:1"]})
    alice = tenant.say("group member note from alice", peer_id="1", **group)
    bob = tenant.say("group member note from bob", peer_id="2", **group)
    assert alice["session_key"] == "agent:main:telegram:group:-42:member:alice"
    assert bob["session_key"] == "agent:main:telegram:group:-42:member:2"
    hits = tenant.search("member note", consistent_with=bob["position"])["results"]
    assert isinstance(hits, list)
    assert {h["session_key"] for h in hits} == {alice["session_key"], bob["session_key"]}
    assert len({h["session_id"] for h in hits}) == 2

    missing = tenant.ingest.post("/v1/messages", json={"text": "who am I", **group})
    assert missing.status_code == 422, missing.text
    assert [e["field"] for e in missing.json()["errors"]] == ["peer_id"]


def test_each_chat_type_resets_by_its_own_policy(tenant: Tenant) -> None:
    _configure(
        tenant,
        reset={"mode": "none", "timezone": "Asia/Shanghai"},
        reset_by_type={"direct": {"mode": "daily", "at_hour": 4}, "group": {"mode": "idle", "idle_minutes": 30}},
    )
    group = {"channel": "telegram", "chat_type": "group", "chat_id": "-7", "peer_id": "1"}
    # 20:00 and 22:00 in Shanghai: two idle hours, no daily hour in between
    tenant.say("direct evening", message_id="p1", occurred_at="2026-11-29T12:00:00+00:00")
    tenant.say("group evening", message_id="p2", occurred_at="2026-11-29T12:00:00+00:00", **group)
    tenant.say("direct later", message_id="p3", occurred_at="2026-11-29T14:00:00+00:00")
    last = tenant.say("group later", message_id="p4", occurred_at="2026-11-29T14:00:00+00:00", **group)
    tenant.search("later", consistent_with=last["position"])

    direct = _history(tenant, "agent:main:main")
    assert [m["text"] for m in direct["messages"]] == ["direct evening", "direct later"]
    grouped = _history(tenant, "agent:main:telegram:group:-7")
    assert [m["text"] for m in grouped["messages"]] == ["group later"]  # idle for 2 h: a new session

    # 06:00 in Shanghai the next morning: the direct session passed its daily hour
    morning = tenant.say("direct morning", message_id="p5", occurred_at="2026-11-29T22:00:00+00:00")
    tenant.search("morning", consistent_with=morning["position"])
    fresh = _history(tenant, "agent:main:main")
    assert [m["text"] for m in fresh["messages"]] == ["direct morning"]
    assert fresh["session_id"] != direct["session_id"]
    earlier = _history(tenant, "agent:main:main", session_id=direct["session_id"])
    assert [m["text"] for m in earlier["messages"]] == ["direct evening", "direct later"]


async def _sweep(stack: LocalStack, tenant: str) -> tuple[int, int]:
    """A sweep with the deployment's defaults at a year: only an agent's own retention can age anything."""
    pool = await asyncpg.create_pool(stack.postgres_url(), min_size=1, max_size=1)
    try:
        return await LifecycleSweeper(pool, timedelta(days=365), timedelta(days=365), every_s=60).sweep(tenant)
    finally:
        await pool.close()


def _statuses(tenant: Tenant, agent: str) -> list[str]:
    sessions = tenant.recall.get("/v1/sessions", params={"agent_id": agent}).json()["sessions"]
    return [s["status"] for s in sessions]


def test_retention_is_per_agent_and_archived_sessions_stay_readable_and_searchable(
    services: LocalStack, tenant: Tenant
) -> None:
    # about 0.9 s to dormant and 1.7 s to archived for `brief`; `keeper` keeps the deployment's year
    _configure(tenant, "brief", retention={"dormant_after_days": 1e-5, "archive_after_days": 2e-5})
    brief = tenant.say("the brief agent remembers the glacier trip", agent_id="brief", message_id="r1")
    kept = tenant.say("the keeper agent remembers the glacier trip", agent_id="keeper", message_id="r2")
    # each agent is applied on its own partition: wait for both, so `brief`'s session is stored before the clock
    tenant.search("glacier", consistent_with=brief["position"], agent_id="brief")
    tenant.search("glacier", consistent_with=kept["position"], agent_id="keeper")
    time.sleep(2.5)  # let `brief`'s session pass both of its thresholds

    dormant, archived = asyncio.run(_sweep(services, tenant.tenant_id))
    assert (dormant, archived) == (0, 1)
    assert _statuses(tenant, "brief") == ["archived"]
    assert _statuses(tenant, "keeper") == ["active"]

    history = _history(tenant, "agent:brief:main", agent_id="brief")
    assert [m["text"] for m in history["messages"]] == ["the brief agent remembers the glacier trip"]
    hits = tenant.search("glacier", agent_id="brief")["results"]
    assert isinstance(hits, list)
    assert [h["session_key"] for h in hits] == ["agent:brief:main"]


async def _compaction_keys(stack: LocalStack, tenant_id: str, agent: str) -> list[str]:
    nc = await nats.connect(stack.nats_url)
    try:
        subject = f"cairn.{tenant_id}.{agent}.session.compaction-imminent"
        events = [decode_event(m.data or b"") for m in await stream_messages(nc.jetstream(), SESSION_STREAM, subject)]
    finally:
        await nc.close()
    return [e.session_key for e in events if isinstance(e, CompactionImminent)]


def test_an_agents_own_compaction_limit_fires_compaction_imminent(services: LocalStack, tenant: Tenant) -> None:
    # a window far beyond what is written: only the agent's byte limit can fire
    _configure(tenant, "tight", context_window=1_000_000, compaction={"max_transcript_bytes": 4096})
    _configure(tenant, "roomy", context_window=1_000_000)
    sentence = "A paragraph about the vendor comparison, long enough to count. " * 16  # ~1 KB
    for agent in ("tight", "roomy"):
        for i in range(5):
            last = tenant.say(sentence, agent_id=agent, message_id=f"{agent}-{i}")
        tenant.search("vendor", consistent_with=last["position"], agent_id=agent)
    deadline = time.monotonic() + 10
    while not asyncio.run(_compaction_keys(services, tenant.tenant_id, "tight")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert asyncio.run(_compaction_keys(services, tenant.tenant_id, "tight")) == ["agent:tight:main"]
    assert asyncio.run(_compaction_keys(services, tenant.tenant_id, "roomy")) == []
