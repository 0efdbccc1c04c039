"""`cairn reindex` rebuilds the memory index from the stored documents and remembered turns, and the
rebuilt index is the one the indexer built from the events: same chunks, terms and vectors."""

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg
import numpy as np
import pytest

from cairn.cli.reindex import SET_TENANT, reindex
from cairn.local import LocalStack
from cairn.local.stack import OWNER
from cairn.memindex import LocalEmbedder, MemoryIndex, MemoryIndexSettings, dated_note
from cairn.memindex.chunking import chunk_lines
from cairn.memindex.indexing import content_hash
from cairn.memindex.store import ChunkRow
from cairn.text import index_terms, to_tsvector_literal
from tests.conftest import Tenant
from tests.e2e.test_memory_search import Memory

pytestmark = pytest.mark.e2e

SNAPSHOT = """
SELECT agent_id, source, path, version, session_key, session_id::text, start_line, end_line, text, terms::text,
       content_hash, message_ids::text[], external_ids, dated, model, dims, embedding::real[] AS embedding, context
FROM indexer.memory_chunks WHERE tenant_id = $1
ORDER BY source, path, session_id, start_line, text
"""
COUNTS = "SELECT agent_id, chunks FROM indexer.memory_counts WHERE tenant_id = $1 AND chunks > 0 ORDER BY agent_id"

NO_INDEX_WORK = {"sessions": 0, "documents": 0, "reembed": 0, "flushes": 0}


async def _snapshot(stack: LocalStack, tenant: str) -> tuple[list[dict[str, Any]], list[Any]]:
    conn = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        rows = [dict(r) for r in await conn.fetch(SNAPSHOT, tenant)]
        counts = [tuple(r) for r in await conn.fetch(COUNTS, tenant)]
    finally:
        await conn.close()
    return rows, counts


def _same(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> None:
    assert len(before) == len(after)
    for old, new in zip(before, after, strict=True):
        assert {k: v for k, v in old.items() if k != "embedding"} == {k: v for k, v in new.items() if k != "embedding"}
        # the same text through the same model; float sums may differ in the last bits with batch composition
        assert np.allclose(np.asarray(old["embedding"]), np.asarray(new["embedding"]), atol=1e-5)


def _caught_up(memory: Memory) -> bool:
    """The index holds every write up to the last one (debounced turns included): not just a quiet moment."""
    body = {"query": "harbour", "consistent_with": memory.position}
    response = memory.tenant.recall.post("/v1/memory/search", json=body)
    return response.status_code == 200 and response.json()["indexing"] is False


def test_reindex_rebuilds_the_same_index(services: LocalStack, tenant: Tenant) -> None:
    memory = Memory(services, tenant)
    long_note = "\n".join(f"- note {i}: we talked about topic number {i} and its details" for i in range(120))
    memory.write({"MEMORY.md": "- prefers tea\n- lives in Lyon", "memory/daily/2026-11-02.md": long_note})
    memory.write({"MEMORY.md": "- prefers green tea\n- lives in Lyon"})  # an edit: version 2
    for i in range(40):
        last = tenant.say(f"message {i} about the harbour trip and the boat number {i}", message_id=f"r{i}")
    memory.position = last["position"]
    assert memory.settle(
        lambda: (
            _caught_up(memory)
            # (40 messages cross the compaction threshold: their flush waits for a model, which is not index work)
            and memory.status()["pending"] | {"flushes": 0}
            == {"sessions": 0, "documents": 0, "reembed": 0, "flushes": 0, "record_judgements": 0}
            and memory.status()["counts"]["session_chunks"] > 1
        )
    )
    before = asyncio.run(_snapshot(services, tenant.tenant_id))
    assert len(before[0]) > 5

    embedder = LocalEmbedder()
    rebuilt = asyncio.run(
        reindex(services.postgres_url(OWNER), MemoryIndex(embedder, MemoryIndexSettings()),
                tenant.tenant_id)
    )  # fmt: skip
    assert (rebuilt.tenants, rebuilt.documents, rebuilt.sessions) == (1, 2, 1)
    after = asyncio.run(_snapshot(services, tenant.tenant_id))
    _same(before[0], after[0])
    assert before[1] == after[1]
    assert memory.search("green tea")[0]["path"] == "MEMORY.md"


class _WindowIndex(MemoryIndex):
    """The indexer before documents were cut by entry: every document in ~400-token windows, without context."""

    def document_rows(self, path: str, version: int, text: str, at: datetime) -> list[ChunkRow]:
        spans = chunk_lines(text.splitlines(), self.settings.chunk_tokens, self.settings.overlap_tokens)
        return [
            ChunkRow("memory", s.first + 1, s.last + 1, s.text, to_tsvector_literal(index_terms(s.text)),
                     content_hash(s.text), path=path, version=version, dated=dated_note(path), occurred_at=at)
            for s in spans
        ]  # fmt: skip


NOTE = "memory/daily/2026-11-02.md"


def test_reindex_documents_rechunks_old_windows_of_every_document_into_the_entries_the_indexer_makes(
    services: LocalStack, tenant: Tenant
) -> None:
    memory = Memory(services, tenant)
    facts = "# About the user\n- prefers green tea\n- lives in Lyon\n- plays the cello\n- has a cat called Miso\n"
    note = "- we talked about the harbour\n- and boats\n"
    memory.write({"MEMORY.md": facts, NOTE: note})
    assert memory.settle(lambda: _caught_up(memory) and memory.status()["pending"]["documents"] == 0)
    by_entry = asyncio.run(_snapshot(services, tenant.tenant_id))
    # every item is an entry, named by the heading above it (its context)
    entries = [(r["start_line"], r["end_line"], r["context"]) for r in by_entry[0] if r["path"] == "MEMORY.md"]
    assert entries == [(2, 2, "# About the user"), (3, 3, "# About the user"), (4, 4, "# About the user"),
                       (5, 5, "# About the user")]  # fmt: skip
    assert [(r["start_line"], r["end_line"]) for r in by_entry[0] if r["path"] == NOTE] == [(1, 1), (2, 2)]

    url = services.postgres_url(OWNER)
    embedder = LocalEmbedder()
    windows = _WindowIndex(embedder, MemoryIndexSettings())
    asyncio.run(_put_old_windows(url, windows, tenant.tenant_id, {"MEMORY.md": facts, NOTE: note}))
    old = asyncio.run(_snapshot(services, tenant.tenant_id))
    assert [(r["path"], r["start_line"], r["end_line"]) for r in old[0]] == [("MEMORY.md", 1, 5), (NOTE, 1, 2)]

    index = MemoryIndex(embedder, MemoryIndexSettings())
    trusted = asyncio.run(reindex(url, index, tenant.tenant_id, trusted_only=True))
    assert (trusted.tenants, trusted.documents, trusted.sessions, trusted.chunks) == (1, 1, 0, 4)
    halfway = asyncio.run(_snapshot(services, tenant.tenant_id))
    assert [(r["path"], r["start_line"], r["end_line"]) for r in halfway[0] if r["path"] == NOTE] == [(NOTE, 1, 2)]

    rebuilt = asyncio.run(reindex(url, index, tenant.tenant_id, documents_only=True))
    assert (rebuilt.tenants, rebuilt.documents, rebuilt.sessions, rebuilt.chunks) == (1, 2, 0, 6)
    after = asyncio.run(_snapshot(services, tenant.tenant_id))
    _same(by_entry[0], after[0])  # both documents as the indexer cuts them
    assert by_entry[1] == after[1]


async def _put_old_windows(url: str, index: MemoryIndex, tenant: str, documents: dict[str, str]) -> None:
    conn = await asyncpg.connect(url)
    try:
        async with conn.transaction():
            await conn.execute(SET_TENANT, tenant)
            for path, text in documents.items():
                version = await conn.fetchval(VERSION, uuid.UUID(tenant), path)
                await index.put_document(conn, tenant, "main", path, version, text, datetime.now(UTC))
    finally:
        await conn.close()


VERSION = "SELECT version FROM consolidation.documents WHERE tenant_id = $1 AND path = $2"
