"""Reads of consolidation's memory records, each in a tenant transaction (row-level security), behind the
`RecordReads` port: current records, records as of a world time, the whole history, one record with the chain
of values it replaced, and whether a record request has been applied (read-your-writes)."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import asyncpg

from cairn.storage.postgres import tenant_transaction

COLUMNS = """
record_id::text, kind, entity, relation, text, original, language, importance, explicit, pinned, pending,
valid_from, valid_until, recorded_at, retired_at, retired_reason, superseded_by::text, session_key, session_id,
message_ids, origin, merged_ids::text[], bank_path, bank_line
"""
# $3 kind and $4 entity filter when not null; $5 as_of (world time) when not null, else current only unless $6
# (the whole history); paged by record id (UUIDv7: creation order), $7 the last id of the previous page.
LIST_RECORDS = f"""
SELECT {COLUMNS} FROM consolidation.records
WHERE tenant_id = $1 AND agent_id = $2
  AND ($3::text IS NULL OR kind = $3) AND ($4::text IS NULL OR entity = $4)
  AND CASE WHEN $5::timestamptz IS NOT NULL
           THEN valid_from <= $5 AND (valid_until IS NULL OR valid_until > $5)
           ELSE $6 OR retired_at IS NULL END
  AND ($7::uuid IS NULL OR record_id > $7)
ORDER BY record_id LIMIT $8
"""
# A record by its id, or by the id of a request merged into it.
GET_RECORD = f"""
SELECT {COLUMNS} FROM consolidation.records
WHERE tenant_id = $1 AND agent_id = $2 AND (record_id = $3 OR $3 = ANY(merged_ids))
ORDER BY record_id = $3 DESC LIMIT 1
"""
# The values a record replaced, newest first: every record superseded by it, by those, and so on.
GET_HISTORY = f"""
WITH RECURSIVE chain AS (
    SELECT record_id, 1 AS depth FROM consolidation.records WHERE tenant_id = $1 AND superseded_by = $2
    UNION ALL
    SELECT r.record_id, c.depth + 1 FROM consolidation.records r JOIN chain c ON r.superseded_by = c.record_id
    WHERE r.tenant_id = $1 AND c.depth < 100
)
SELECT {COLUMNS} FROM consolidation.records JOIN chain USING (record_id)
WHERE tenant_id = $1 ORDER BY depth, valid_from DESC
"""
COUNT_CURRENT = """
SELECT count(*) AS current, count(*) FILTER (WHERE pending IS NOT NULL) AS pending FROM consolidation.records
WHERE tenant_id = $1 AND agent_id = $2 AND retired_at IS NULL
"""
REQUEST_APPLIED = """
SELECT EXISTS (SELECT 1 FROM consolidation.record_requests WHERE tenant_id = $1 AND agent_id = $2 AND ingest_seq >= $3)
"""


@dataclass(frozen=True)
class Filters:
    kind: str | None
    entity: str | None
    as_of: datetime | None
    include_history: bool


class RecordReads(Protocol):
    async def records(
        self, tenant: str, agent: str, filters: Filters, after: str | None, limit: int
    ) -> list[dict[str, Any]]: ...
    async def record(self, tenant: str, agent: str, record_id: str) -> dict[str, Any] | None: ...
    async def history(self, tenant: str, record_id: str) -> list[dict[str, Any]]: ...
    async def applied(self, tenant: str, agent: str, position: int) -> bool: ...
    async def counts(self, tenant: str, agent: str) -> tuple[int, int]:
        """Current records, and those of them pending a model's judgement."""
        ...


class RecordStore:
    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]") -> None:
        self._pool = pool

    async def records(
        self, tenant: str, agent: str, filters: Filters, after: str | None, limit: int
    ) -> list[dict[str, Any]]:
        f = filters
        async with tenant_transaction(self._pool, tenant) as conn:
            rows = await conn.fetch(
                LIST_RECORDS, tenant, agent, f.kind, f.entity, f.as_of, f.include_history, after, limit
            )
        return [dict(r) for r in rows]

    async def record(self, tenant: str, agent: str, record_id: str) -> dict[str, Any] | None:
        async with tenant_transaction(self._pool, tenant) as conn:
            row = await conn.fetchrow(GET_RECORD, tenant, agent, record_id)
        return None if row is None else dict(row)

    async def history(self, tenant: str, record_id: str) -> list[dict[str, Any]]:
        async with tenant_transaction(self._pool, tenant) as conn:
            rows = await conn.fetch(GET_HISTORY, tenant, record_id)
        return [dict(r) for r in rows]

    async def applied(self, tenant: str, agent: str, position: int) -> bool:
        async with tenant_transaction(self._pool, tenant) as conn:
            return bool(await conn.fetchval(REQUEST_APPLIED, tenant, agent, position))

    async def counts(self, tenant: str, agent: str) -> tuple[int, int]:
        async with tenant_transaction(self._pool, tenant) as conn:
            row = await conn.fetchrow(COUNT_CURRENT, tenant, agent)
        return (0, 0) if row is None else (int(row["current"]), int(row["pending"]))
