"""Recall's scope on real Postgres (as `cairn_app`, under row-level security): the facts the recall service reads
of a session, the `/active-memory` switch the session service stores, and which other conversations are the
same person's. Sessions are written by the session handlers on `PostgresTranscripts`, as the service writes them."""

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, TypeAlias

import asyncpg
import pytest

from cairn.events import AgentConfig, AgentConfigured, InboundMessage, MessageReceived, SessionCommand
from cairn.recall.recall_scope import SessionFacts, eligibility, same_person_sessions, session_facts
from cairn.session.handlers import SessionHandlers
from cairn.session.settings import SessionSettings
from cairn.session.store import PostgresTranscripts
from cairn.storage.postgres import tenant_transaction

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
HANDLERS = SessionHandlers(SessionSettings())
START = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
CONFIG = AgentConfig.model_validate({
    "dm_scope": "per-channel-peer",
    "identity_links": {"alice": ["telegram:123", "discord:987"]},
    "owner_peers": ["telegram:42"],
})  # fmt: skip

MAIN, DASHBOARD = "agent:main:main", f"agent:main:dashboard:{uuid.uuid4()}"
ALICE_TG, ALICE_DC = "agent:main:telegram:direct:alice", "agent:main:discord:direct:alice"
ALICE_OLD = "agent:main:direct:123"  # keyed per-peer before the link existed; its channel places the peer
OWNER_TG = "agent:main:telegram:direct:42"
BOB, BOB_THREAD = "agent:main:telegram:direct:999", "agent:main:telegram:direct:999:thread:5"
CAROL = "agent:main:slack:direct:555"
GROUP = "agent:main:telegram:group:-100"
CRON, SUBAGENT = "cron:nightly", "agent:main:subagent:7f3a"
HELPER_ALICE = "agent:helper:telegram:direct:alice"


def _agent(key: str) -> str:
    return key.split(":")[1] if key.startswith("agent:") else "main"


async def _say(pool: Pool, tenant: str, key: str, text: str, channel: str, minute: int = 0, **fields: Any) -> None:
    agent = _agent(key)
    message = InboundMessage(agent_id=agent, text=text, channel=channel, message_id=str(uuid.uuid4()), **fields)
    at = START + timedelta(minutes=minute)
    event = MessageReceived(tenant_id=tenant, agent_id=agent, session_key=key, message=message, occurred_at=at)
    async with tenant_transaction(pool, tenant) as conn:
        await HANDLERS.on_message(PostgresTranscripts(conn), event, 1)


async def _conversations(pool: Pool, tenant: str) -> None:
    """One of each kind of session an agent has, each with a message."""
    thread = SessionCommand(
        tenant_id=tenant, command="create", session_key=DASHBOARD, session_id=str(uuid.uuid4()), channel="dashboard"
    )
    async with tenant_transaction(pool, tenant) as conn:
        await HANDLERS.on_command(PostgresTranscripts(conn), thread, 1)
    for key, channel in [
        (MAIN, "telegram"), (ALICE_TG, "telegram"), (ALICE_DC, "discord"), (ALICE_OLD, "telegram"),
        (OWNER_TG, "telegram"), (BOB, "telegram"), (BOB_THREAD, "telegram"), (CAROL, "slack"),
        (CRON, "cron"), (SUBAGENT, "api"), (HELPER_ALICE, "telegram"),
    ]:  # fmt: skip
        await _say(pool, tenant, key, "hello", channel)
    await _say(pool, tenant, GROUP, "hi all", "telegram", chat_type="group", chat_id="-100", peer_id="123")


async def _same(pool: Pool, tenant: str, key: str, config: AgentConfig = CONFIG) -> set[str]:
    async with tenant_transaction(pool, tenant) as conn:
        found = await same_person_sessions(conn, tenant, _agent(key), key, config)
    assert len(found) == len(set(found))
    return set(found)


async def _facts(pool: Pool, tenant: str, key: str, agent: str = "main") -> SessionFacts | None:
    async with tenant_transaction(pool, tenant) as conn:
        return await session_facts(conn, tenant, agent, key)


async def test_facts_of_a_session_and_its_active_memory_switch(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    await _say(app_pool, tenant, ALICE_TG, "hello", "telegram", peer_id="123")
    facts = await _facts(app_pool, tenant, ALICE_TG)
    assert facts is not None
    assert facts.session_id is not None
    assert (facts.chat_type, facts.channel, facts.active_memory) == ("direct", "telegram", True)
    assert eligibility(facts, CONFIG.active_memory, text="what did I say?") is None

    await _say(app_pool, tenant, ALICE_TG, "/active-memory off", "telegram", peer_id="123")
    off = await _facts(app_pool, tenant, ALICE_TG)
    assert off is not None
    assert off.active_memory is False
    assert off.session_id == facts.session_id
    assert eligibility(off, CONFIG.active_memory, text="what did I say?") == "active memory is off for this session"
    await _say(app_pool, tenant, ALICE_TG, "/active-memory status", "telegram", peer_id="123")
    assert (await _facts(app_pool, tenant, ALICE_TG)) == off
    await _say(app_pool, tenant, ALICE_TG, "/active-memory on", "telegram", peer_id="123")
    assert (await _facts(app_pool, tenant, ALICE_TG)) == facts

    async with tenant_transaction(app_pool, tenant) as conn:
        texts = await conn.fetch("SELECT text FROM session.entries WHERE session_id = $1", uuid.UUID(facts.session_id))
    assert [r["text"] for r in texts] == ["hello"]  # the commands are not conversation


async def test_facts_of_an_unknown_session_another_agents_or_another_tenants_are_none(app_pool: Pool) -> None:
    tenant, other = str(uuid.uuid4()), str(uuid.uuid4())
    await _say(app_pool, tenant, GROUP, "hi all", "telegram", chat_type="group", chat_id="-100")
    group = await _facts(app_pool, tenant, GROUP)
    assert group is not None
    assert (group.chat_type, group.channel) == ("group", "telegram")
    assert await _facts(app_pool, tenant, "agent:main:telegram:group:-200") is None
    assert await _facts(app_pool, tenant, GROUP, agent="helper") is None
    assert await _facts(app_pool, other, GROUP) is None  # row-level security: the other tenant sees nothing


async def test_an_idle_reset_keeps_the_switch_of_the_key(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    idle = AgentConfig.model_validate({"reset": {"mode": "idle", "idle_minutes": 60}})
    async with tenant_transaction(app_pool, tenant) as conn:
        await HANDLERS.on_configured(
            PostgresTranscripts(conn), AgentConfigured(tenant_id=tenant, version=1, config=idle)
        )
    await _say(app_pool, tenant, MAIN, "hi", "telegram")
    await _say(app_pool, tenant, MAIN, "/active-memory off", "telegram")
    before = await _facts(app_pool, tenant, MAIN)
    await _say(app_pool, tenant, MAIN, "two hours later", "telegram", minute=120)
    after = await _facts(app_pool, tenant, MAIN)
    assert before is not None
    assert after is not None
    assert after.session_id != before.session_id
    assert after.active_memory is False


async def test_the_same_persons_other_direct_conversations(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    await _conversations(app_pool, tenant)
    assert await _same(app_pool, tenant, ALICE_TG) == {ALICE_DC, ALICE_OLD}
    assert await _same(app_pool, tenant, ALICE_DC) == {ALICE_TG, ALICE_OLD}
    assert await _same(app_pool, tenant, ALICE_OLD) == {ALICE_TG, ALICE_DC}
    assert await _same(app_pool, tenant, MAIN) == {DASHBOARD, OWNER_TG}
    assert await _same(app_pool, tenant, DASHBOARD) == {MAIN, OWNER_TG}
    assert await _same(app_pool, tenant, OWNER_TG) == {MAIN, DASHBOARD}
    assert await _same(app_pool, tenant, BOB) == {BOB_THREAD}
    assert await _same(app_pool, tenant, BOB_THREAD) == {BOB}
    assert await _same(app_pool, tenant, CAROL) == set()
    for nobodys in (GROUP, CRON, SUBAGENT, "agent:main:dashboard:incognito-1"):  # never a source, never a reader
        assert await _same(app_pool, tenant, nobodys) == set()
    assert await _same(app_pool, tenant, HELPER_ALICE) == set()  # another agent's Alice: none of main's sessions


async def test_remember_across_conversations_off_reaches_nothing_and_null_reaches_them(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    await _conversations(app_pool, tenant)
    off = CONFIG.model_copy(update={"remember_across_conversations": False})
    assert await _same(app_pool, tenant, ALICE_TG, off) == set()
    assert await _same(app_pool, tenant, MAIN, off) == set()
    assert CONFIG.remember_across_conversations is None
    assert await _same(app_pool, tenant, ALICE_TG, CONFIG) == {ALICE_DC, ALICE_OLD}


async def test_two_peers_under_per_peer_never_reach_each_other(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    per_peer = AgentConfig(dm_scope="per-peer", remember_across_conversations=True)
    first, second = "agent:main:direct:123", "agent:main:direct:456"
    await _say(app_pool, tenant, first, "I fly to Lisbon on Tuesday", "telegram", peer_id="123")
    await _say(app_pool, tenant, second, "what is my plan?", "telegram", peer_id="456")
    await _say(app_pool, tenant, "agent:main:discord:direct:123", "hi", "discord", peer_id="123")  # another 123
    assert await _same(app_pool, tenant, first, per_peer) == set()
    assert await _same(app_pool, tenant, second, per_peer) == set()


async def test_another_tenants_sessions_are_never_the_same_person(app_pool: Pool) -> None:
    tenant, other = str(uuid.uuid4()), str(uuid.uuid4())
    await _say(app_pool, tenant, ALICE_TG, "hello", "telegram")
    await _say(app_pool, other, ALICE_DC, "hello", "discord")
    assert await _same(app_pool, tenant, ALICE_TG) == set()
    assert await _same(app_pool, other, ALICE_DC) == set()
