"""A changed embedding model (issue 5): the indexer's worker gives every chunk and every remembered turn a
vector of the configured model in the background, reports what is left in the status count, and keeps
doing so while it runs — a replica still on the old model during a rolling deploy writes old vectors
after the worker has caught up once. Search never mixes models: until a chunk is re-embedded, the
vector side does not see it at all.

The models are two names served by a real OpenAI-compatible HTTP server in this process (the only
offline model shipped is the local one), and the test runs in a database of its own: its worker looks
for stale vectors across every tenant, which must not reach the shared database's other tests."""

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, TypeAlias

import asyncpg
import numpy as np
import pytest
from pydantic import SecretStr

from cairn.indexer.memory_worker import MemoryWorker
from cairn.local import LocalStack
from cairn.memindex import MemoryIndex, store
from cairn.memindex.embeddings import OpenAICompatibleEmbedder
from cairn.memindex.settings import EmbeddingSettings, MemoryIndexSettings
from cairn.memindex.transcripts import Turn
from cairn.recall.memory_queries import MemoryReads, Where
from cairn.storage.postgres import create_pool, tenant_transaction
from cairn.storage.settings import PostgresSettings
from tests.embedding_api import Handler, serving
from tests.integration.conftest import eventually, holds_for, own_database

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
OLD, NEW, DIMS = "embed-old", "embed-new", 384
# What migration 0141 did to the turn vectors stored before turn_in_context (squashed into the baselines since).
MARK_LINE_ALONE = "UPDATE indexer.memory_turns SET model = model || ' (line alone)' WHERE model IS NOT NULL"
AT = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
NOTES = {
    "memory/bank/garden.md": "# Garden\n\nThe tomatoes are planted along the south fence.\n",
    "memory/bank/travel.md": "# Travel\n\nThe passport expires in March; renew it before the Lisbon trip.\n",
}


def _vector(model: str, text: str) -> list[float]:
    """Words hashed into a vector, differently per model: texts sharing words are near under one model,
    and the same text is far apart under two (as two real models' spaces are unrelated)."""
    vector = np.zeros(DIMS)
    for word in text.lower().split():
        seed = int.from_bytes(hashlib.sha256(f"{model}:{word}".encode()).digest()[:8], "big")
        vector += np.random.default_rng(seed).normal(size=DIMS)
    return [float(x) for x in vector]


class _Embeddings(Handler):
    texts: ClassVar[dict[str, int]] = {}  # texts embedded, per model

    def answer(self, body: dict[str, Any]) -> tuple[int, Any]:
        model = body["model"]
        type(self).texts[model] = type(self).texts.get(model, 0) + len(body["input"])
        data = [{"index": i, "embedding": _vector(model, text)} for i, text in enumerate(body["input"])]
        return 200, {"data": data, "model": model}


@pytest.fixture
def embeddings_url() -> Iterator[str]:
    _Embeddings.texts = {}
    with serving(_Embeddings) as url:
        yield url


@pytest.fixture
async def database(stack: LocalStack) -> AsyncIterator[str]:
    async with own_database(stack, "cairn_reembed") as name:
        yield stack.database_url(name)


@pytest.fixture
def superuser_url(stack: LocalStack, database: str) -> str:
    """The same database as the superuser, who reads past row-level security."""
    return stack.database_url(database.rsplit("/", 1)[1], "postgres")


@pytest.fixture
async def pool(database: str) -> AsyncIterator[Pool]:
    created = await create_pool(PostgresSettings(url=SecretStr(database), pool_min=1, pool_max=4))
    try:
        yield created
    finally:
        await created.close()


def _index(url: str, model: str) -> MemoryIndex:
    embedder = OpenAICompatibleEmbedder(EmbeddingSettings(provider="openai-compatible", url=url, model=model))
    return MemoryIndex(embedder, MemoryIndexSettings(poll_s=0.05, reembed_check_s=0.2))


async def _old_replica_writes(pool: Pool, index: MemoryIndex, tenant: str, notes: dict[str, str]) -> None:
    async with tenant_transaction(pool, tenant) as conn:
        for path, text in notes.items():
            await index.put_document(conn, tenant, "main", path, 1, text, AT)


async def _old_replica_remembers(pool: Pool, index: MemoryIndex, tenant: str) -> None:
    """A remembered conversation: its turns, then its chunks and turn vectors, as the old model made them."""
    session = uuid.uuid4()
    said = ["my sister Ana moves to Porto in June", "Porto is lovely in June, tell her to see the river"]
    async with tenant_transaction(pool, tenant) as conn:
        for position, (role, text) in enumerate(zip(("user", "assistant"), said, strict=True)):
            turn = Turn(position, 0, str(uuid.uuid4()), role, None, text, AT + timedelta(minutes=position))
            await store.add_turn(conn, uuid.UUID(tenant), "main", session, "agent:main:main", turn)
        await index.index_session(conn, tenant, "main", session)


async def _models(pool: Pool, tenant: str) -> tuple[set[str | None], set[str | None]]:
    """The models of the tenant's chunk vectors and of its turn vectors."""
    async with tenant_transaction(pool, tenant) as conn:
        chunks = {r["model"] for r in await conn.fetch("SELECT model FROM indexer.memory_chunks")}
        turns = {r["model"] for r in await conn.fetch("SELECT model FROM indexer.memory_turns")}
    return chunks, turns


async def _found(reads: MemoryReads, tenant: str, query: str) -> list[str]:
    """Paths (or session chunks) the vector side of a search with the new model finds, nearest first."""
    where = Where(tenant, "main", ("memory", "sessions"), None)
    scores = await reads.vector(where, _vector(NEW, query), NEW, 10)
    details, _ = await reads.details(tenant, list(scores), NEW, [], [])
    by_id = {d.chunk_id: d.path or "session" for d in details}
    return [by_id[c] for c in sorted(scores, key=lambda c: -scores[c])]


async def test_a_changed_model_is_re_embedded_in_the_background_and_search_never_mixes_models(
    superuser_url: str, pool: Pool, embeddings_url: str
) -> None:
    tenant = str(uuid.uuid4())
    old, new, reads = _index(embeddings_url, OLD), _index(embeddings_url, NEW), MemoryReads(pool)
    superuser = await asyncpg.connect(superuser_url)
    try:  # stale turns are looked for per tenant of ingest.tenants (they stay under forced row-level security)
        await superuser.execute(
            "INSERT INTO ingest.tenants (tenant_id, name) VALUES ($1, 'reembed')", uuid.UUID(tenant)
        )
    finally:
        await superuser.close()
    await _old_replica_writes(pool, old, tenant, NOTES)
    await _old_replica_remembers(pool, old, tenant)
    assert await _models(pool, tenant) == ({OLD}, {OLD})
    assert await _turns_read_in_context(pool, tenant, OLD)
    chunks = (await reads.status(tenant, "main", NEW))["chunks"]
    assert chunks["without_vector"] == chunks["memory_chunks"] + chunks["session_chunks"] == 3

    # Configured for the new model, search finds nothing by meaning yet rather than comparing across models.
    assert await _found(reads, tenant, "when does the passport expire") == []

    worker = asyncio.create_task(MemoryWorker(pool, new).run())
    try:
        assert await eventually(lambda: _all_new(pool, tenant)), await _models(pool, tenant)
        assert (await reads.status(tenant, "main", NEW))["chunks"]["without_vector"] == 0
        assert await _turns_read_in_context(pool, tenant, NEW)  # re-embedded as they were first embedded
        assert (await _found(reads, tenant, "when does the passport expire"))[0] == "memory/bank/travel.md"
        embedded = _Embeddings.texts[NEW]

        # Caught up and idle; an old replica keeps writing, and the running worker catches that up too.
        await _old_replica_writes(pool, old, tenant, {"memory/bank/pets.md": "# Pets\n\nThe cat is called Miso.\n"})
        assert await eventually(lambda: _all_new(pool, tenant)), await _models(pool, tenant)
        assert (await _found(reads, tenant, "what is the cat called"))[0] == "memory/bank/pets.md"
        assert _Embeddings.texts[NEW] == embedded + 1  # only the new chunk: what was done is not redone
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)


async def test_turn_vectors_made_from_their_line_alone_are_re_embedded_in_context(
    superuser_url: str, pool: Pool, embeddings_url: str
) -> None:
    """Turn vectors stored before a turn's vector read its line in context were made from the line alone under the
    same model id. 0141 marks them as of another model: search leaves them out, and the worker re-embeds them in
    context, so one model id never holds both kinds."""
    tenant = str(uuid.uuid4())
    new, reads = _index(embeddings_url, NEW), MemoryReads(pool)
    await _old_replica_remembers(pool, new, tenant)
    alone = ["User: my sister Ana moves to Porto in June",
             "Assistant: Porto is lovely in June, tell her to see the river"]  # fmt: skip
    async with tenant_transaction(pool, tenant) as conn:  # what the index held before turn_in_context
        for position, line in enumerate(alone):
            await conn.execute(
                "UPDATE indexer.memory_turns SET embedding = $1::real[]::vector WHERE position = $2",
                _vector(NEW, line), position,
            )  # fmt: skip
        said = [r["id"] for r in await conn.fetch("SELECT message_id::text AS id FROM indexer.memory_turns")]
    assert not await _turns_read_in_context(pool, tenant, NEW)
    query = _vector(NEW, "Porto in June")
    assert len(await reads.turn_cosines(tenant, said, NEW, query)) == 2

    owner = await asyncpg.connect(superuser_url)
    try:
        await owner.execute("INSERT INTO ingest.tenants (tenant_id, name) VALUES ($1, 'alone')", uuid.UUID(tenant))
        await owner.execute(MARK_LINE_ALONE)
    finally:
        await owner.close()
    assert (await _models(pool, tenant))[1] == {f"{NEW} (line alone)"}
    assert await reads.turn_cosines(tenant, said, NEW, query) == {}  # left out, not compared
    assert (await reads.status(tenant, "main", NEW))["turns"]["without_vector"] == 2  # and shown as work left

    worker = asyncio.create_task(MemoryWorker(pool, new).run())
    try:
        assert await eventually(lambda: _all_new(pool, tenant)), await _models(pool, tenant)
        assert await _turns_read_in_context(pool, tenant, NEW)
        assert len(await reads.turn_cosines(tenant, said, NEW, query)) == 2
        assert (await reads.status(tenant, "main", NEW))["turns"]["without_vector"] == 0
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)


async def _turns_read_in_context(pool: Pool, tenant: str, model: str) -> bool:
    """Whether each remembered turn's vector is `model`'s of its line after the line before it (`turn_in_context`):
    the first turn's of its line alone, the answer's of the question and the answer."""
    question = "User: my sister Ana moves to Porto in June"
    expected = [question, f"{question}\nAssistant: Porto is lovely in June, tell her to see the river"]
    async with tenant_transaction(pool, tenant) as conn:
        rows = await conn.fetch("SELECT embedding::real[] AS v FROM indexer.memory_turns ORDER BY position")
    cosines = [
        float(np.dot(r["v"], want) / (np.linalg.norm(r["v"]) * np.linalg.norm(want)))
        for r, want in zip(rows, (_vector(model, text) for text in expected), strict=True)
    ]
    return len(rows) == 2 and min(cosines) > 0.999


async def _all_new(pool: Pool, tenant: str) -> bool:
    return await _models(pool, tenant) == ({NEW}, {NEW})


async def test_during_a_rolling_deploy_only_the_newest_model_re_embeds_until_its_replicas_are_gone(
    superuser_url: str, pool: Pool, embeddings_url: str
) -> None:
    """Replicas of the old and the new model run side by side: the old one does not turn the new model's
    vectors back into its own (each would undo the other's work until the old replicas were gone), and the
    text it still indexes is re-embedded by the new one. A rollback — the new replicas gone — hands the
    index back to the old model once their claim is no longer renewed."""
    tenant = str(uuid.uuid4())
    old, new = _index(embeddings_url, OLD), _index(embeddings_url, NEW)
    await _old_replica_writes(pool, old, tenant, NOTES)
    old_worker = asyncio.create_task(MemoryWorker(pool, old).run())
    new_worker: asyncio.Task[None] | None = None
    try:
        # the old replica has claimed its model (and found it everywhere) before the new one starts
        assert await eventually(lambda: _claimed(superuser_url, OLD))
        assert await _models(pool, tenant) == ({OLD}, set())
        new_worker = asyncio.create_task(MemoryWorker(pool, new).run())
        assert await eventually(lambda: _chunks_of(pool, tenant, NEW)), await _models(pool, tenant)
        assert await holds_for(lambda: _chunks_of(pool, tenant, NEW), seconds=2.0), "the old replica re-embedded back"
        assert _Embeddings.texts.get(OLD, 0) == len(NOTES)  # only what it indexed itself

        await _old_replica_writes(pool, old, tenant, {"memory/bank/pets.md": "# Pets\n\nThe cat is called Miso.\n"})
        assert await eventually(lambda: _chunks_of(pool, tenant, NEW)), await _models(pool, tenant)
        assert await holds_for(lambda: _chunks_of(pool, tenant, NEW), seconds=1.0)

        new_worker.cancel()
        await asyncio.gather(new_worker, return_exceptions=True)
        assert await eventually(lambda: _chunks_of(pool, tenant, OLD)), await _models(pool, tenant)
    finally:
        for worker in (old_worker, new_worker):
            if worker is not None:
                worker.cancel()
                await asyncio.gather(worker, return_exceptions=True)


async def _chunks_of(pool: Pool, tenant: str, model: str) -> bool:
    return (await _models(pool, tenant))[0] == {model}


async def _claimed(superuser_url: str, model: str) -> bool:
    """Whether a replica has claimed `model` (the claims table is read only through its function, so as the owner)."""
    owner = await asyncpg.connect(superuser_url)
    try:
        return bool(await owner.fetchval("SELECT count(*) FROM indexer.embedding_models WHERE model = $1", model))
    finally:
        await owner.close()
