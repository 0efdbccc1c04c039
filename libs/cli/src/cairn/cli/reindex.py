"""`cairn reindex`: rebuild the memory index from its stored sources — every live memory document
(`consolidation.documents`) and every remembered turn (`indexer.memory_turns`) — with the same code the
indexer runs, so a rebuild yields the same chunks and vectors. One tenant at a time, each in one
transaction: searches see the old index or the new one, never half of each.

With `documents_only` (`cairn reindex --documents`), every stored memory document is re-chunked in place and the
remembered turns are left alone: what a change of the documents' chunking (entry by entry with its context,
`cairn.memindex.entries`) needs, without re-chunking and re-embedding every transcript. With `trusted_only`
(`--trusted`), only `MEMORY.md` and `memory/bank/*` are.

Runs as the schema owner (CAIRN_POSTGRES_ADMIN_URL): it lists the tenants, then sets each in turn, so
row-level security still scopes every statement. Run it with the indexer stopped, or accept that events
applied meanwhile are rebuilt from their rows anyway.
"""

import time
import uuid
from dataclasses import dataclass

import asyncpg

from cairn.events.documents import trusted_path
from cairn.memindex import LocalEmbedder, MemoryIndex

SET_TENANT = "SELECT set_config('cairn.tenant_id', $1, true)"
TENANTS = "SELECT tenant_id::text FROM ingest.tenants WHERE $1::uuid IS NULL OR tenant_id = $1 ORDER BY tenant_id"
CLEAR_CHUNKS = "DELETE FROM indexer.memory_chunks WHERE tenant_id = $1"
CLEAR_COUNTS = "DELETE FROM indexer.memory_counts WHERE tenant_id = $1"
DOCUMENTS = """
SELECT agent_id, path, version, text, updated_at FROM consolidation.documents
WHERE tenant_id = $1 AND NOT deleted ORDER BY agent_id, path
"""
SESSIONS = """
SELECT DISTINCT t.agent_id, t.session_id FROM indexer.memory_turns t
LEFT JOIN indexer.memory_agents a ON a.tenant_id = t.tenant_id AND a.agent_id = t.agent_id
WHERE t.tenant_id = $1 AND coalesce(a.remember, true)
ORDER BY t.agent_id, t.session_id
"""


@dataclass
class Rebuilt:
    tenants: int = 0
    documents: int = 0
    sessions: int = 0
    chunks: int = 0
    seconds: float = 0.0


async def reindex(
    admin_url: str,
    index: MemoryIndex,
    tenant: str | None = None,
    *,
    documents_only: bool = False,
    trusted_only: bool = False,
) -> Rebuilt:
    if isinstance(index.embedder, LocalEmbedder):
        index.embedder.load()
    started, rebuilt = time.perf_counter(), Rebuilt()
    conn = await asyncpg.connect(admin_url)
    try:
        for row in await conn.fetch(TENANTS, uuid.UUID(tenant) if tenant else None):
            async with conn.transaction():
                await conn.execute(SET_TENANT, row["tenant_id"])
                if documents_only or trusted_only:
                    await _rechunk_documents(conn, index, row["tenant_id"], rebuilt, trusted_only=trusted_only)
                else:
                    await _rebuild_tenant(conn, index, row["tenant_id"], rebuilt)
            rebuilt.tenants += 1
    finally:
        await conn.close()
    rebuilt.seconds = round(time.perf_counter() - started, 3)
    return rebuilt


async def _rebuild_tenant(
    conn: "asyncpg.Connection[asyncpg.Record]", index: MemoryIndex, tenant: str, out: Rebuilt
) -> None:
    tenant_id = uuid.UUID(tenant)
    await conn.execute(CLEAR_CHUNKS, tenant_id)
    await conn.execute(CLEAR_COUNTS, tenant_id)
    for doc in await conn.fetch(DOCUMENTS, tenant_id):
        out.chunks += await index.put_document(
            conn, tenant, doc["agent_id"], doc["path"], doc["version"], doc["text"], doc["updated_at"]
        )
        out.documents += 1
    for session in await conn.fetch(SESSIONS, tenant_id):
        out.chunks += (await index.index_session(conn, tenant, session["agent_id"], session["session_id"])).chunks
        out.sessions += 1


async def _rechunk_documents(
    conn: "asyncpg.Connection[asyncpg.Record]", index: MemoryIndex, tenant: str, out: Rebuilt, *, trusted_only: bool
) -> None:
    """Each document's chunks (only trusted ones') replaced by those of today's chunking (counts follow
    `put_document`; unchanged text keeps its vector)."""
    for doc in await conn.fetch(DOCUMENTS, uuid.UUID(tenant)):
        if not trusted_only or trusted_path(doc["path"]):
            out.chunks += await index.put_document(
                conn, tenant, doc["agent_id"], doc["path"], doc["version"], doc["text"], doc["updated_at"]
            )
            out.documents += 1
