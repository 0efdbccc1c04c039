"""Memory documents, the outcomes of write requests and due flushes in Postgres (schema `consolidation`),
behind the `MemoryStore` port.

A store wraps the connection of one tenant transaction opened by the projection, so its writes commit
together with the `(consumer, event_id)` record and the outbox.
"""

from typing import Protocol, TypeAlias

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from cairn.consolidation.domain import Document, DocumentWrite, WriteOutcome
from cairn.events import CompactionImminent

# FOR UPDATE: a second writer of the same document waits for this transaction instead of racing it.
SELECT_DOCUMENT = """
SELECT version, text, deleted FROM consolidation.documents
WHERE tenant_id = $1 AND agent_id = $2 AND path = $3
FOR UPDATE
"""
# The version guard turns a write planned on a stale read (a concurrent first insert) into no row.
UPSERT_DOCUMENT = """
INSERT INTO consolidation.documents AS d (tenant_id, agent_id, path, version, text, deleted)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (tenant_id, agent_id, path) DO UPDATE
SET version = excluded.version, text = excluded.text, deleted = excluded.deleted, updated_at = now()
WHERE d.version = excluded.version - 1
RETURNING d.version
"""
INSERT_VERSION = """
INSERT INTO consolidation.document_versions (tenant_id, agent_id, path, version, text, change)
VALUES ($1, $2, $3, $4, $5, $6)
"""
# Ingest reads an outcome within seconds of the request, or again on a retry with the same idempotency key
# (inside JetStream's one-hour dedup window): a day is plenty, and each write clears its tenant's older ones.
RECORD_OUTCOME = """
WITH expired AS (
    DELETE FROM consolidation.write_outcomes
    WHERE tenant_id = $1 AND decided_at < now() - interval '1 day'
)
INSERT INTO consolidation.write_outcomes (tenant_id, request_id, agent_id, path, outcome, version, change, detail)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT DO NOTHING
"""
# One flush per (session, window, cycle): a second compaction-imminent of the same cycle (a redelivery, a replay)
# finds it due or done already.
INSERT_FLUSH_DUE = """
INSERT INTO consolidation.flushes_due (tenant_id, agent_id, session_id, cycle, session_key, reset_index,
    up_to_position, forced)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT DO NOTHING
RETURNING cycle
"""

Connection: TypeAlias = "asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]"


class StaleDocumentError(RuntimeError):
    """Another transaction changed the document since it was read; the projection retries the event."""


class MemoryStore(Protocol):
    async def get_document(self, tenant_id: str, agent_id: str, path: str) -> Document | None:
        """The current row (tombstones included), locked until the transaction ends."""
        ...

    async def save_document(self, tenant_id: str, agent_id: str, write: DocumentWrite) -> None:
        """Store `write` as the current row and as a row of the version history."""
        ...

    async def record_outcome(self, tenant_id: str, agent_id: str, outcome: WriteOutcome) -> None:
        """Keep what became of a write request, in the same transaction as the write itself."""
        ...

    async def record_flush_due(self, event: CompactionImminent) -> bool:
        """Mark the compaction cycle's flush as due; False when it already was."""
        ...


class PostgresStore:
    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    async def get_document(self, tenant_id: str, agent_id: str, path: str) -> Document | None:
        row = await self._conn.fetchrow(SELECT_DOCUMENT, tenant_id, agent_id, path)
        return None if row is None else Document(row["version"], row["text"], row["deleted"])

    async def save_document(self, tenant_id: str, agent_id: str, write: DocumentWrite) -> None:
        deleted = write.change == "deleted"
        key = (tenant_id, agent_id, write.path, write.version)
        if await self._conn.fetchval(UPSERT_DOCUMENT, *key, write.text, deleted) is None:
            raise StaleDocumentError(f"{write.path} changed concurrently; version {write.version} is taken")
        await self._conn.execute(INSERT_VERSION, *key, write.text, write.change)

    async def record_outcome(self, tenant_id: str, agent_id: str, outcome: WriteOutcome) -> None:
        await self._conn.execute(
            RECORD_OUTCOME, tenant_id, outcome.request_id, agent_id, outcome.path,
            outcome.outcome, outcome.version, outcome.change, outcome.detail,
        )  # fmt: skip

    async def record_flush_due(self, event: CompactionImminent) -> bool:
        cycle = await self._conn.fetchval(
            INSERT_FLUSH_DUE,
            event.tenant_id,
            event.agent_id,
            event.session_id,
            event.cycle,
            event.session_key,
            event.reset_index,
            event.up_to_position,
            event.forced,
        )
        return cycle is not None
