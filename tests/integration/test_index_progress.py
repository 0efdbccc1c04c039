"""Read-your-writes waits of session search and of memory search are woken by the indexer's commit
(LISTEN/NOTIFY), not only by their poll: with a poll far longer than the bound, a wait still sees the position the
indexer commits."""

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import TypeAlias

import asyncpg
import pytest

from cairn.indexer import store
from cairn.local import LocalStack
from cairn.memindex import store as memory_store
from cairn.recall.memory_queries import MemoryReads
from cairn.recall.progress import CHANNELS, IndexProgress
from cairn.recall.queries import ReadStore
from cairn.storage.postgres import tenant_transaction
from tests.integration.conftest import eventually, holds_for, listening_since, postgres_now

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
NEVER = 3600.0  # a poll interval no wait here lives to see
BOUND = 20.0


@pytest.fixture
async def progress(stack: LocalStack) -> AsyncIterator[IndexProgress]:
    listener = IndexProgress(stack.postgres_url())
    since = await postgres_now(stack)
    task = asyncio.create_task(listener.run())
    assert await eventually(lambda: listening_since(stack, since, CHANNELS[-1])), "the listener's LISTEN never ran"
    try:
        yield listener
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def commit_progress(pool: Pool, tenant: str, agent: str, position: int) -> None:
    async with tenant_transaction(pool, tenant) as conn:
        await store.advance(conn, {(tenant, agent): position})


async def waited(reads: ReadStore, tenant: str, agent: str, position: int, pool: Pool) -> bool:
    """Wait for `position` while the indexer commits it a moment later; the wait must end by half its bound
    (its poll never comes before the bound, and at the bound it would look once more and answer True)."""
    waiting = asyncio.create_task(reads.wait_for_index(tenant, agent, position, BOUND))
    await asyncio.sleep(0.3)
    assert not waiting.done(), "the position was not there yet: the wait is on"
    await commit_progress(pool, tenant, agent, position)
    return await asyncio.wait_for(waiting, BOUND / 2)


async def test_a_wait_is_woken_by_the_indexer_s_commit(
    app_pool: Pool, projector_pool: Pool, progress: IndexProgress
) -> None:
    tenant = str(uuid.uuid4())
    assert await waited(ReadStore(app_pool, progress, poll_s=NEVER), tenant, "main", 7, projector_pool)


async def test_without_the_listener_a_wait_sees_the_commit_only_at_its_next_poll(
    app_pool: Pool, projector_pool: Pool
) -> None:
    """The control: the same wait without the listener is still waiting for its next poll after the commit."""
    tenant = str(uuid.uuid4())
    reads = ReadStore(app_pool, None, poll_s=NEVER)
    waiting = asyncio.create_task(reads.wait_for_index(tenant, "main", 7, BOUND))
    await asyncio.sleep(0.3)
    await commit_progress(projector_pool, tenant, "main", 7)
    still_waiting = await holds_for(lambda: _not_done(waiting), 2.0)
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    assert still_waiting


async def test_a_lost_listening_connection_is_replaced(
    app_pool: Pool, projector_pool: Pool, progress: IndexProgress, admin: "asyncpg.Connection[asyncpg.Record]"
) -> None:
    killed = await admin.fetchval(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'"
        " AND pid <> pg_backend_pid()"
    )
    assert killed >= 1
    await asyncio.sleep(1.0)  # listening again
    tenant = str(uuid.uuid4())
    assert await waited(ReadStore(app_pool, progress, poll_s=NEVER), tenant, "main", 3, projector_pool)


async def test_a_memory_search_wait_is_woken_by_the_memory_index_s_commit(
    app_pool: Pool, projector_pool: Pool, progress: IndexProgress
) -> None:
    tenant = uuid.UUID(str(uuid.uuid4()))
    reads = MemoryReads(app_pool, progress=progress, poll_s=NEVER)
    waiting = asyncio.create_task(reads.wait_for(str(tenant), "main", 5, BOUND))
    await asyncio.sleep(0.3)
    assert not waiting.done(), "the position was not there yet: the wait is on"
    async with tenant_transaction(projector_pool, str(tenant)) as conn:
        await memory_store.advance(conn, tenant, "main", 5)
    assert await asyncio.wait_for(waiting, BOUND / 2)


async def test_a_memory_search_wait_for_a_due_session_is_woken_when_it_is_chunked(
    app_pool: Pool, projector_pool: Pool, progress: IndexProgress
) -> None:
    """A turn's position is passed at once, but its session is chunked only after the debounce: the wait is held
    by the pending session (the position's notification wakes it to look again, and it keeps waiting) and woken
    again when the chunking commits."""
    tenant, session = uuid.UUID(str(uuid.uuid4())), uuid.uuid4()
    reads = MemoryReads(app_pool, progress=progress, poll_s=NEVER)
    waiting = asyncio.create_task(reads.wait_for(str(tenant), "main", 9, BOUND))
    async with tenant_transaction(projector_pool, str(tenant)) as conn:
        await memory_store.mark_pending(conn, tenant, "main", (session, "agent:main:main"), (60.0, 60.0), 9)
        await memory_store.advance(conn, tenant, "main", 9)
    await asyncio.sleep(1.0)
    assert not waiting.done(), "the session is not chunked yet: the wait is on"
    async with tenant_transaction(projector_pool, str(tenant)) as conn:
        await memory_store.finish_pending(conn, tenant, session)
    assert await asyncio.wait_for(waiting, BOUND / 2)


async def test_without_the_listener_a_memory_search_wait_sees_the_commit_only_at_its_next_poll(
    app_pool: Pool, projector_pool: Pool
) -> None:
    tenant = uuid.UUID(str(uuid.uuid4()))
    waiting = asyncio.create_task(MemoryReads(app_pool, poll_s=NEVER).wait_for(str(tenant), "main", 5, BOUND))
    await asyncio.sleep(0.3)
    async with tenant_transaction(projector_pool, str(tenant)) as conn:
        await memory_store.advance(conn, tenant, "main", 5)
    still_waiting = await holds_for(lambda: _not_done(waiting), 2.0)
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    assert still_waiting


async def _not_done(task: "asyncio.Task[bool]") -> bool:
    return not task.done()
