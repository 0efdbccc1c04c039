"""Due sessions of agents that do not remember (0096): the worker's one look for due sessions drops their marks
and notifies, instead of a five-round-trip tenant transaction per session; their turns stay stored. Sessions of
agents that remember (or have no setting: the default remembers) are chunked as before, and a mark or setting
held by another transaction is left to the worker's own transaction.

Runs in a database of its own (its worker looks for due sessions of every tenant), with the embeddings of a real
OpenAI-compatible HTTP server in this process."""

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, TypeAlias

import asyncpg
import pytest

from cairn.indexer.memory_worker import MemoryWorker
from cairn.local import LocalStack
from cairn.memindex import MemoryIndex, store
from cairn.memindex.embeddings import OpenAICompatibleEmbedder
from cairn.memindex.settings import EmbeddingSettings, MemoryIndexSettings
from cairn.memindex.transcripts import Turn
from cairn.storage.postgres import MEMORY_PROGRESS_CHANNEL, tenant_transaction
from tests.embedding_api import Handler, serving
from tests.integration.conftest import own_database_pool

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
AT = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
DUE = "SELECT count(*) FROM indexer.memory_pending WHERE session_id = $1"
TURNS = "SELECT count(*) FROM indexer.memory_turns WHERE session_id = $1"
CHUNKS = "SELECT count(*) FROM indexer.memory_chunks WHERE session_id = $1"


class _Embeddings(Handler):
    def answer(self, body: dict[str, Any]) -> tuple[int, Any]:
        return 200, {"data": [{"index": i, "embedding": [1.0, 0.5, 0.25]} for i in range(len(body["input"]))],
                     "model": body["model"]}  # fmt: skip


@pytest.fixture
async def pool(stack: LocalStack) -> AsyncIterator[Pool]:
    async with own_database_pool(stack, "cairn_forgetting", pool_max=6) as created:
        yield created


@pytest.fixture
def embeddings_url() -> Iterator[str]:
    with serving(_Embeddings) as url:
        yield url


def _worker(pool: Pool, url: str) -> MemoryWorker:
    embedder = OpenAICompatibleEmbedder(EmbeddingSettings(provider="openai-compatible", url=url, model="m"))
    return MemoryWorker(pool, MemoryIndex(embedder, MemoryIndexSettings(chunk_tokens=64, overlap_tokens=16)))


async def _session(pool: Pool, tenant: str, remember: bool | None, due_in: float = 0.0) -> uuid.UUID:
    """A conversation of three turns of agent main, due for chunking after `due_in` seconds; `remember` is the
    agent's stored setting (None: never configured)."""
    session = uuid.uuid4()
    async with tenant_transaction(pool, tenant) as conn:
        if remember is not None:
            await store.save_remember(conn, uuid.UUID(tenant), "main", remember, 1)
        for position in range(3):
            role = ("user", "assistant")[position % 2]
            text = f"copper lantern harbour number {position}"
            turn = Turn(position, 0, str(uuid.uuid4()), role, None, text, AT + timedelta(seconds=position))
            await store.add_turn(conn, uuid.UUID(tenant), "main", session, "agent:main:main", turn)
        await store.mark_pending(conn, uuid.UUID(tenant), "main", (session, "agent:main:main"), (due_in, due_in))
    return session


async def _count(pool: Pool, tenant: str, query: str, session: uuid.UUID) -> int:
    async with tenant_transaction(pool, tenant) as conn:
        return int(await conn.fetchval(query, session))


async def test_due_sessions_of_agents_that_forget_are_finished_in_the_look_and_notified(
    pool: Pool, embeddings_url: str
) -> None:
    forgets, remembers, unset = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    dropped = [await _session(pool, forgets, remember=False) for _ in range(2)]
    later = await _session(pool, forgets, remember=False, due_in=3600)
    chunked = await _session(pool, remembers, remember=True)
    default = await _session(pool, unset, remember=None)
    notified = asyncio.Event()

    def wake(*_: object) -> None:
        notified.set()

    async with pool.acquire() as listener:
        await listener.add_listener(MEMORY_PROGRESS_CHANNEL, wake)
        assert await _worker(pool, embeddings_url).index_due_sessions() == 4, "two dropped, two chunked"
        await asyncio.wait_for(notified.wait(), 10)
        await listener.remove_listener(MEMORY_PROGRESS_CHANNEL, wake)

    for session in dropped:
        assert await _count(pool, forgets, DUE, session) == 0, "the mark is dropped"
        assert await _count(pool, forgets, TURNS, session) == 3, "the turns stay (turning remember on chunks them)"
        assert await _count(pool, forgets, CHUNKS, session) == 0
    assert await _count(pool, forgets, DUE, later) == 1, "a session not yet due keeps its mark"
    for tenant, session in ((remembers, chunked), (unset, default)):
        assert await _count(pool, tenant, DUE, session) == 0
        assert await _count(pool, tenant, CHUNKS, session) > 0, "an agent that remembers (or by default) is chunked"


async def test_a_mark_or_setting_held_elsewhere_is_left_to_the_worker_transaction(
    pool: Pool, embeddings_url: str
) -> None:
    """Remember being turned on (as agent.configured does: the setting, then every session marked due) in an open
    transaction: the mark is not dropped, and once that commits the session is chunked. A mark another worker
    holds is skipped."""
    tenant = str(uuid.uuid4())
    session = await _session(pool, tenant, remember=False)
    worker = _worker(pool, embeddings_url)
    async with tenant_transaction(pool, tenant) as turning_on:
        assert await store.save_remember(turning_on, uuid.UUID(tenant), "main", True, 2)
        await store.mark_pending(turning_on, uuid.UUID(tenant), "main", (session, "agent:main:main"), (0.0, 0.0))
        assert await worker.index_due_sessions() == 0, "held by the change: skipped"
        assert await _count(pool, tenant, DUE, session) == 1, "not dropped while the setting is being changed"
    assert await worker.index_due_sessions() == 1
    assert await _count(pool, tenant, DUE, session) == 0
    assert await _count(pool, tenant, CHUNKS, session) > 0, "chunked: the agent remembers now"

    other = await _session(pool, tenant, remember=None)
    async with tenant_transaction(pool, tenant) as conn:
        await store.save_remember(conn, uuid.UUID(tenant), "main", False, 3)
    async with tenant_transaction(pool, tenant) as holder:
        assert await store.claim_pending(holder, uuid.UUID(tenant), other) == "main"
        assert await worker.index_due_sessions() == 0, "held by another worker: skipped"
        assert await _count(pool, tenant, DUE, other) == 1
    assert await worker.index_due_sessions() == 1
    assert await _count(pool, tenant, DUE, other) == 0
    assert await _count(pool, tenant, TURNS, other) == 3


async def test_the_look_itself_finishes_the_sessions_of_agents_that_forget(pool: Pool) -> None:
    """One statement: the forgetting agent's due marks come back finished and are gone; the others stay due."""
    forgets, remembers = str(uuid.uuid4()), str(uuid.uuid4())
    dropped = {await _session(pool, forgets, remember=False) for _ in range(3)}
    later = await _session(pool, forgets, remember=False, due_in=3600)
    kept = await _session(pool, remembers, remember=True)
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT session_id, finished FROM indexer.take_due_memory_sessions(50)")
    assert {r["session_id"]: r["finished"] for r in rows} == {**dict.fromkeys(dropped, True), kept: False}
    for session in dropped:
        assert await _count(pool, forgets, DUE, session) == 0
    assert await _count(pool, forgets, DUE, later) == 1
    assert await _count(pool, remembers, DUE, kept) == 1, "left to the worker's transaction"
