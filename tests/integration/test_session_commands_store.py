"""The command side's stores against real Postgres (as `cairn_app`, under row-level security): console
threads and forks through the session handlers and `PostgresTranscripts` (the contract the unit tests
run against the in-memory twin), agent settings, and ingest's versioned agent configs."""

import uuid
from datetime import UTC, datetime
from typing import TypeAlias

import asyncpg
import pytest

from cairn.events import (
    AgentConfig,
    AgentConfigured,
    Event,
    InboundMessage,
    MessageReceived,
    SessionCommand,
    SessionForked,
    TranscriptAppended,
)
from cairn.ingest.store import AgentConfigs, VersionConflict
from cairn.session.handlers import SessionHandlers
from cairn.session.settings import SessionSettings
from cairn.session.store import PostgresTranscripts
from cairn.storage.postgres import tenant_transaction

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
KEY = "agent:main:telegram:direct:42"
HANDLERS = SessionHandlers(SessionSettings())


async def _say(pool: Pool, tenant: str, text: str, external_id: str, seq: int, key: str = KEY) -> list[Event]:
    message = InboundMessage(text=text, channel="telegram", peer_id="42", message_id=external_id)
    event = MessageReceived(
        tenant_id=tenant, session_key=key, message=message, occurred_at=datetime(2026, 11, 29, 9, seq, tzinfo=UTC)
    )
    async with tenant_transaction(pool, tenant) as conn:
        return await HANDLERS.on_message(PostgresTranscripts(conn), event, seq)


async def _command(pool: Pool, tenant: str, command: SessionCommand, seq: int) -> list[Event]:
    async with tenant_transaction(pool, tenant) as conn:
        return await HANDLERS.on_command(PostgresTranscripts(conn), command, seq)


def _fork(tenant: str, key: str, from_message_id: str | None = None) -> SessionCommand:
    return SessionCommand(
        tenant_id=tenant, command="fork", session_key=key, session_id=str(uuid.uuid4()), parent_session_key=KEY,
        from_message_id=from_message_id, channel="dashboard",
    )  # fmt: skip


async def test_fork_copies_a_window_in_postgres_and_leaves_the_parent(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    await _say(app_pool, tenant, "old window", "tg-1", 1)
    await _say(app_pool, tenant, "/new", "tg-2", 2)
    await _say(app_pool, tenant, "first of the window", "tg-3", 3)
    await _say(app_pool, tenant, "second of the window", "tg-4", 4)
    child_key = f"agent:main:dashboard:{uuid.uuid4()}"
    command = _fork(tenant, child_key)
    emitted = await _command(app_pool, tenant, command, 5)

    copies = [e for e in emitted if isinstance(e, TranscriptAppended)]
    assert [(c.position, c.text, c.occurred_at.minute, c.external_id) for c in copies] == [
        (1, "first of the window", 3, None),
        (2, "second of the window", 4, None),
    ]
    forked = emitted[-1]
    assert isinstance(forked, SessionForked)
    assert (forked.session_id, forked.from_position, forked.ingest_seq) == (command.session_id, 4, 5)
    async with tenant_transaction(app_pool, tenant) as conn:
        child = await conn.fetchrow(
            "SELECT session_id, parent_session_id, last_position, message_count, window_tokens, channel "
            "FROM session.sessions WHERE session_key = $1",
            child_key,
        )
        parent = await conn.fetchrow(
            "SELECT session_id, last_position FROM session.sessions WHERE session_key = $1", KEY
        )
    assert child is not None
    assert parent is not None
    assert str(child["session_id"]) == command.session_id
    assert child["parent_session_id"] == parent["session_id"]
    assert (child["last_position"], child["message_count"], child["channel"]) == (2, 2, "dashboard")
    assert child["window_tokens"] == sum(c.token_estimate for c in copies)
    assert parent["last_position"] == 4
    assert await _command(app_pool, tenant, command, 5) == []  # re-applied: nothing new
    assert await _say(app_pool, tenant, "first of the window", "tg-3", 6) == []  # the parent's ids still dedup


async def test_fork_from_a_message_by_either_id(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    said = [await _say(app_pool, tenant, f"line {n}", f"tg-{n}", n) for n in range(1, 4)]
    ours = next(e.message_id for e in said[0] if isinstance(e, TranscriptAppended))
    for from_id, expected in (("tg-2", ["line 1", "line 2"]), (ours, ["line 1"])):
        emitted = await _command(app_pool, tenant, _fork(tenant, f"agent:main:dashboard:{uuid.uuid4()}", from_id), 9)
        assert [e.text for e in emitted if isinstance(e, TranscriptAppended)] == expected


async def test_another_tenants_parent_is_invisible_to_a_fork(app_pool: Pool) -> None:
    owner, intruder = str(uuid.uuid4()), str(uuid.uuid4())
    await _say(app_pool, owner, "private words", "tg-1", 1)
    emitted = await _command(app_pool, intruder, _fork(intruder, f"agent:main:dashboard:{uuid.uuid4()}"), 2)
    assert [e.type for e in emitted] == ["session.created.v1"]  # an empty root thread, nothing copied


async def test_agent_settings_reach_the_session_row_and_only_move_forward(app_pool: Pool) -> None:
    tenant = str(uuid.uuid4())
    for version, window in ((2, 32_000), (1, 900_000)):
        event = AgentConfigured(tenant_id=tenant, version=version, config=AgentConfig(context_window=window))
        async with tenant_transaction(app_pool, tenant) as conn:
            await HANDLERS.on_configured(PostgresTranscripts(conn), event)
    async with tenant_transaction(app_pool, tenant) as conn:
        row = await PostgresTranscripts(conn).open_session(tenant, "main", KEY, "direct", "telegram")
        other = await PostgresTranscripts(conn).open_session(tenant, "ops", KEY, "direct", "telegram")
    assert (row.context_window, other.context_window) == (32_000, None)


async def test_agent_configs_are_versioned_and_an_unannounced_change_is_not_stored(app_pool: Pool) -> None:
    tenant, configs, announced = str(uuid.uuid4()), AgentConfigs(app_pool, cache_seconds=60), []

    async def announce(version: int) -> None:
        announced.append(version)

    async def fail(version: int) -> None:
        raise ConnectionError("JetStream is away")

    assert (await configs.get(tenant, "main")).version == 0
    assert (await configs.routing(tenant, "main")).dm_scope == "main"
    assert await configs.put(tenant, "main", AgentConfig(dm_scope="per-peer"), None, announce) == 1
    assert (await configs.routing(tenant, "main")).dm_scope == "per-peer"  # the cache was forgotten
    with pytest.raises(VersionConflict):
        await configs.put(tenant, "main", AgentConfig(), 0, announce)
    with pytest.raises(ConnectionError):
        await configs.put(tenant, "main", AgentConfig(dm_scope="main"), 1, fail)
    assert await configs.put(tenant, "main", AgentConfig(dm_scope="per-channel-peer"), 1, announce) == 2
    stored = await configs.get(tenant, "main")
    assert (stored.version, stored.config.dm_scope, announced) == (2, "per-channel-peer", [1, 2])
    assert (await configs.get(str(uuid.uuid4()), "main")).version == 0
