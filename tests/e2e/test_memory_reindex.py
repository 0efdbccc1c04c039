"""`cairn reindex` rebuilds the memory index from the stored documents and remembered turns, and the
rebuilt index is the one the indexer built from the events: same chunks, terms and vectors."""

import asyncio
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import asyncpg
import numpy as np
import pytest

from cairn.cli.reindex import SET_TENANT, reindex
from cairn.local import LocalStack
from cairn.local.stack import OWNER
from cairn.memindex import LocalEmbedder, MemoryIndex, MemoryIndexSettings
from cairn.memindex.store import ChunkRow
from tests.conftest import Tenant
from tests.e2e.test_memory_search import Memory

pytestmark = pytest.mark.e2e

SNAPSHOT = """
SELECT agent_id, source, path, version, session_key, session_id::text, start_line, end_line, text, terms::text,
       content_hash, message_ids::text[], external_ids, dated, model, dims, embedding::real[] AS embedding
FROM indexer.memory_chunks WHERE tenant_id = $1
ORDER BY source, path, session_id, start_line, text
"""
COUNTS = "SELECT agent_id, chunks FROM indexer.memory_counts WHERE tenant_id = $1 AND chunks > 0 ORDER BY agent_id"


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
            and memory.status()["pending"] == {"sessions": 0, "documents": 0, "reembed": 0}
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
    """The indexer before trusted documents were cut by entry: every document in ~400-token windows."""

    def document_rows(self, path: str, version: int, text: str, at: datetime) -> list[ChunkRow]:
        windows = MemoryIndex.document_rows(self, "memory/daily/undated.md", version, text, at)
        return [replace(row, path=path) for row in windows]


def test_reindex_trusted_rechunks_old_windows_of_memory_files_into_the_entries_the_indexer_makes(
    services: LocalStack, tenant: Tenant
) -> None:
    memory = Memory(services, tenant)
    facts = "# About the user\n- prefers green tea\n- lives in Lyon\n- plays the cello\n- has a cat called Miso\n"
    memory.write({"MEMORY.md": facts, "memory/daily/2026-11-02.md": "- we talked about the harbour\n- and boats"})
    assert memory.settle(lambda: _caught_up(memory) and memory.status()["pending"]["documents"] == 0)
    by_entry = asyncio.run(_snapshot(services, tenant.tenant_id))
    # The heading names its first entry; "- lives in Lyon" is short enough to take the next one in.
    entries = [(r["start_line"], r["end_line"]) for r in by_entry[0] if r["path"] == "MEMORY.md"]
    assert entries == [(1, 2), (3, 4), (5, 5)]

    url = services.postgres_url(OWNER)
    embedder = LocalEmbedder()
    asyncio.run(_put_old_windows(url, _WindowIndex(embedder, MemoryIndexSettings()), tenant.tenant_id, facts))
    old = asyncio.run(_snapshot(services, tenant.tenant_id))
    assert [(r["start_line"], r["end_line"]) for r in old[0] if r["path"] == "MEMORY.md"] == [(1, 5)]

    rebuilt = asyncio.run(
        reindex(url, MemoryIndex(embedder, MemoryIndexSettings()), tenant.tenant_id, trusted_only=True)
    )
    assert (rebuilt.tenants, rebuilt.documents, rebuilt.sessions, rebuilt.chunks) == (1, 1, 0, 3)
    after = asyncio.run(_snapshot(services, tenant.tenant_id))
    _same(by_entry[0], after[0])  # the daily note untouched, MEMORY.md as the indexer cuts it
    assert by_entry[1] == after[1]


async def _put_old_windows(url: str, index: MemoryIndex, tenant: str, text: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        async with conn.transaction():
            await conn.execute(SET_TENANT, tenant)
            version = await conn.fetchval(VERSION, uuid.UUID(tenant))
            await index.put_document(conn, tenant, "main", "MEMORY.md", version, text, datetime.now(UTC))
    finally:
        await conn.close()


VERSION = "SELECT version FROM consolidation.documents WHERE tenant_id = $1 AND path = 'MEMORY.md'"
