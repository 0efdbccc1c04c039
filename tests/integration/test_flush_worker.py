"""Two flush workers (two consolidation replicas) against the real Postgres and a real chat-completions server:
a flush one of them is doing is skipped by the other, never done twice; when the first dies mid-turn (its
transaction never commits), the other does it, once. The window a flush reads is the one its row fixed."""

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest
from nats.aio.client import Client

from cairn.consolidation.flush_store import DueFlush
from cairn.consolidation.flush_worker import FlushWorker
from cairn.delivery.publisher import EventPublisher
from cairn.llm import LlmSettings, Models
from cairn.local import LocalStack
from tests.integration.conftest import own_database_pool
from tests.model_api import Hang, ModelServer, Reply

pytestmark = pytest.mark.integration

AT = datetime(2026, 11, 29, 9, 30, tzinfo=UTC)
INSERT_ENTRY = """
INSERT INTO session.entries (tenant_id, session_id, position, kind, message_id, channel, role, text, reset_index,
    occurred_at, recorded_at)
VALUES ($1, $2, $3, 'message', $4, 'telegram', 'user', $5, 0, $6, $6)
"""
INSERT_DUE = """
INSERT INTO consolidation.flushes_due (tenant_id, agent_id, session_id, cycle, session_key, up_to_position)
VALUES ($1, 'main', $2, 0, 'agent:main:main', $3)
"""


@pytest.fixture(scope="module")
def model_server() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


@pytest.fixture
async def pool(stack: LocalStack) -> AsyncIterator["asyncpg.Pool[asyncpg.Record]"]:
    """A database of its own: a consolidation service of the same test session must not take these flushes."""
    async with own_database_pool(stack, "cairn_flushes") as created:
        yield created


@pytest.fixture
async def admin_of(pool: "asyncpg.Pool[asyncpg.Record]", stack: LocalStack) -> AsyncIterator[Any]:
    """A superuser connection to that database, for setup and checks past row-level security."""
    name = await pool.fetchval("SELECT current_database()")
    conn = await asyncpg.connect(stack.database_url(name, "postgres"))
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture
async def models(pool: "asyncpg.Pool[asyncpg.Record]", model_server: ModelServer) -> AsyncIterator[Models]:
    created = Models(LlmSettings(base_url=model_server.url, model="test-model"), pool)
    yield created
    await created.aclose()


async def _due_flush(admin: "asyncpg.Connection[asyncpg.Record]") -> DueFlush:
    """Three messages stored, a flush due up to the second: the third came after compaction-imminent."""
    tenant, session = str(uuid.uuid4()), str(uuid.uuid4())
    for position, text in enumerate(("flight to Lisbon on Tuesday", "aisle seat please", "said later"), start=1):
        await admin.execute(INSERT_ENTRY, tenant, session, position, uuid.uuid4(), text, AT)
    await admin.execute(INSERT_DUE, tenant, session, 2)
    return DueFlush(tenant, session, 0, 0)


async def test_a_flush_under_way_is_skipped_by_another_replica_and_taken_over_when_its_replica_dies(
    pool: "asyncpg.Pool[asyncpg.Record]",
    admin_of: "asyncpg.Connection[asyncpg.Record]",
    nats_client: Client,
    models: Models,
    model_server: ModelServer,
) -> None:
    due = await _due_flush(admin_of)
    publisher = EventPublisher(nats_client.jetstream())
    first, second = FlushWorker(pool, models, publisher), FlushWorker(pool, models, publisher)
    model_server.script(Hang(), then=Reply("NO_REPLY"))
    asked = len(model_server.requests)
    under_way = asyncio.create_task(first.flush(due))
    assert await asyncio.to_thread(model_server.wait_for_requests, asked + 1)
    assert await second.flush(due) == 0  # the row is held by the first replica's transaction: skipped
    assert len(model_server.requests) == asked + 1

    under_way.cancel()  # the first replica dies mid-turn: its transaction never commits
    with contextlib.suppress(asyncio.CancelledError):
        await under_way
    assert await second.flush(due) == 1
    assert await second.flush(due) == 0  # done: never again
    row = await admin_of.fetchrow(
        "SELECT done_at, attempts, failures, up_to_position FROM consolidation.flushes_due WHERE tenant_id = $1",
        due.tenant_id,
    )
    assert row is not None
    assert row["done_at"] is not None
    assert (row["attempts"], row["failures"], row["up_to_position"]) == (1, 0, 2)
    turns = model_server.requests[asked:]
    assert len(turns) == 2
    read = str(turns[-1].messages)
    assert "flight to Lisbon" in read
    assert "aisle seat" in read
    assert "said later" not in read  # after the boundary the event fixed: the next cycle's
