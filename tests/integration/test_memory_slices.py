"""A long remembered transcript is chunked a slice of turns per transaction (issue 5): a 10,000-turn import
held one transaction open for minutes while it was embedded. The worker now takes one slice per round,
keeps the session due until its last slice, and ends with exactly the chunks that indexing the whole
transcript at once makes, each turn with its vector.

Runs in a database of its own (its worker looks for due sessions of every tenant), with the embeddings
of a real OpenAI-compatible HTTP server in this process."""

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
from cairn.storage.postgres import tenant_transaction
from tests.embedding_api import Handler, serving
from tests.integration.conftest import own_database_pool

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
AT = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
WORDS = ["river", "lantern", "orchard", "copper", "violin", "harbour", "meadow", "pepper", "saddle", "thunder"]
CHUNKS = "SELECT start_line, end_line, text FROM indexer.memory_chunks WHERE session_id = $1 ORDER BY 1, 2, 3"


class _Embeddings(Handler):
    def answer(self, body: dict[str, Any]) -> tuple[int, Any]:
        data = [{"index": i, "embedding": [1.0 + len(text) % 7, 1.0, 0.5]} for i, text in enumerate(body["input"])]
        return 200, {"data": data, "model": body["model"]}


@pytest.fixture
def embeddings_url() -> Iterator[str]:
    with serving(_Embeddings) as url:
        yield url


@pytest.fixture
async def pool(stack: LocalStack) -> AsyncIterator[Pool]:
    async with own_database_pool(stack, "cairn_slices") as created:
        yield created


def _index(url: str, slice_turns: int, chunk_tokens: int = 64) -> MemoryIndex:
    embedder = OpenAICompatibleEmbedder(EmbeddingSettings(provider="openai-compatible", url=url, model="m"))
    return MemoryIndex(embedder, MemoryIndexSettings(chunk_tokens=chunk_tokens, overlap_tokens=16,
                                                     slice_turns=slice_turns))  # fmt: skip


def _said(count: int, words: int) -> list[str]:
    return [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(words)) + f" number {i}" for i in range(count)]


async def _remembered(pool: Pool, tenant: str, said: list[str]) -> uuid.UUID:
    """A remembered conversation's turns, due for chunking at once."""
    session = uuid.uuid4()
    async with tenant_transaction(pool, tenant) as conn:
        for position, text in enumerate(said):
            role = ("user", "assistant")[position % 2]
            turn = Turn(position, 0, str(uuid.uuid4()), role, None, text, AT + timedelta(seconds=position))
            await store.add_turn(conn, uuid.UUID(tenant), "main", session, "agent:main:main", turn)
        await store.mark_pending(conn, uuid.UUID(tenant), "main", (session, "agent:main:main"), (0.0, 0.0))
    return session


async def _chunks(pool: Pool, tenant: str, session: uuid.UUID) -> list[tuple[int, int, str]]:
    async with tenant_transaction(pool, tenant) as conn:
        return [(r["start_line"], r["end_line"], r["text"]) for r in await conn.fetch(CHUNKS, session)]


async def _still_due(pool: Pool, tenant: str, session: uuid.UUID) -> bool:
    async with tenant_transaction(pool, tenant) as conn:
        return bool(await conn.fetchval("SELECT count(*) FROM indexer.memory_pending WHERE session_id = $1", session))


async def _turns_without_vector(pool: Pool, tenant: str, session: uuid.UUID) -> int:
    async with tenant_transaction(pool, tenant) as conn:
        query = "SELECT count(*) FROM indexer.memory_turns WHERE session_id = $1 AND embedding IS NULL"
        return int(await conn.fetchval(query, session))


async def _whole(pool: Pool, url: str, said: list[str], chunk_tokens: int = 64) -> list[tuple[int, int, str]]:
    """The chunks of the same transcript indexed at once, in a tenant of its own."""
    tenant = str(uuid.uuid4())
    session = await _remembered(pool, tenant, said)
    async with tenant_transaction(pool, tenant) as conn:
        indexed = await _index(url, 1, chunk_tokens).index_session(conn, tenant, "main", session)
    assert not indexed.more
    return await _chunks(pool, tenant, session)


async def test_a_long_transcript_is_chunked_a_slice_per_round_and_ends_as_if_indexed_at_once(
    pool: Pool, embeddings_url: str
) -> None:
    said, tenant = _said(300, 9), str(uuid.uuid4())
    session = await _remembered(pool, tenant, said)
    worker = MemoryWorker(pool, _index(embeddings_url, slice_turns=40))

    assert await worker.index_due_sessions() == 1
    first = await _chunks(pool, tenant, session)
    assert first, "the first slice is chunked at once"
    assert max(end for _, end, _ in first) < 40, "and only the first slice"
    assert await _still_due(pool, tenant, session), "the rest stays due"
    assert await _turns_without_vector(pool, tenant, session) >= 300 - 40

    rounds = 1
    while await _still_due(pool, tenant, session):
        assert await worker.index_due_sessions() == 1
        rounds += 1
        assert rounds < 30, "every round makes progress"
    assert rounds >= 300 // 40, f"{rounds} rounds: each took about one slice"
    assert await worker.index_due_sessions() == 0, "nothing is left due"

    assert await _chunks(pool, tenant, session) == await _whole(pool, embeddings_url, said)
    assert await _turns_without_vector(pool, tenant, session) == 0


async def test_a_slice_that_fits_in_one_chunk_is_widened_so_the_next_round_goes_on(
    pool: Pool, embeddings_url: str
) -> None:
    """Two short turns never fill a chunk: a slice of two would start at the same turn every round."""
    said, tenant = _said(60, 2), str(uuid.uuid4())
    session = await _remembered(pool, tenant, said)
    worker = MemoryWorker(pool, _index(embeddings_url, slice_turns=2, chunk_tokens=200))

    rounds = 0
    while await _still_due(pool, tenant, session):
        await worker.index_due_sessions()
        rounds += 1
        assert rounds < 20, "the worker is stuck on one slice"
    assert await _chunks(pool, tenant, session) == await _whole(pool, embeddings_url, said, chunk_tokens=200)
    assert await _turns_without_vector(pool, tenant, session) == 0
