"""A transcript session the memory worker cannot chunk (here a row its code trips over) no longer stops the
worker for every tenant (issue 28: one bad row ended it for good): the session is held back and logged,
every other due session is chunked, and it is tried again only once its wait is over.

Runs in a database of its own (its worker looks for due sessions of every tenant), with the embeddings of a
real OpenAI-compatible HTTP server in this process."""

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import TypeAlias

import asyncpg
import pytest

from cairn.indexer.memory_worker import MemoryWorker
from cairn.local import LocalStack
from cairn.memindex import MemoryIndex
from cairn.memindex.embeddings import OpenAICompatibleEmbedder
from cairn.memindex.indexing import Indexed
from cairn.memindex.settings import EmbeddingSettings, MemoryIndexSettings
from cairn.memindex.store import Connection
from tests.embedding_api import serving
from tests.integration.conftest import own_database_pool
from tests.integration.test_memory_slices import _chunks, _Embeddings, _remembered, _said, _still_due

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"


class TripsOver(MemoryIndex):
    """The real index, except that one session's rows make it raise as a bug would (naive vs aware)."""

    def __init__(self, url: str, bad: set[uuid.UUID]) -> None:
        embedder = OpenAICompatibleEmbedder(EmbeddingSettings(provider="openai-compatible", url=url, model="m"))
        super().__init__(embedder, MemoryIndexSettings(chunk_tokens=64, overlap_tokens=16))
        self.bad, self.tried = bad, list[uuid.UUID]()

    async def index_session(
        self, conn: Connection, tenant: str, agent: str, session_id: uuid.UUID, slice_turns: int | None = None
    ) -> Indexed:
        self.tried.append(session_id)
        if session_id in self.bad:
            raise TypeError("can't compare offset-naive and offset-aware datetimes")
        return await super().index_session(conn, tenant, agent, session_id, slice_turns)


@pytest.fixture
def embeddings_url() -> Iterator[str]:
    with serving(_Embeddings) as url:
        yield url


@pytest.fixture
async def pool(stack: LocalStack) -> AsyncIterator[Pool]:
    async with own_database_pool(stack, "cairn_isolation") as created:
        yield created


async def test_a_session_the_worker_trips_over_is_held_back_and_the_others_are_chunked(
    pool: Pool, embeddings_url: str
) -> None:
    tenant, other_tenant = str(uuid.uuid4()), str(uuid.uuid4())
    bad = await _remembered(pool, tenant, _said(6, 5))
    good = [await _remembered(pool, tenant, _said(6, 5)), await _remembered(pool, other_tenant, _said(6, 5))]
    index = TripsOver(embeddings_url, {bad})
    worker = MemoryWorker(pool, index)

    assert await worker.index_due_sessions() == 2, "both good sessions, of its tenant and of another"
    for session, owner in zip(good, (tenant, other_tenant), strict=True):
        assert await _chunks(pool, owner, session)
        assert not await _still_due(pool, owner, session)
    assert await _still_due(pool, tenant, bad), "kept due: a fix or a restart takes it up again"
    assert index.tried.count(bad) == 1

    assert await worker.index_due_sessions() == 0
    assert index.tried.count(bad) == 1, "held back: not tried again on every round"
