"""Memory records in Postgres (`consolidation.records`, `consolidation.record_requests`), behind the
`RecordStore` port. Like `PostgresStore`, it wraps the connection of the projection's tenant transaction, so a
record, the superseded ones, the bank file it renders to and the event announcing it commit together."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from cairn.consolidation.candidates import Candidate
from cairn.consolidation.records import Neighbour
from cairn.consolidation.store import Connection

# FOR UPDATE: a second candidate for the same entity waits for this one's decision instead of racing it.
SELECT_NEIGHBOURS = """
SELECT record_id::text, kind, entity, relation, content_hash, valid_from, text,
       CASE WHEN $4::real[] IS NOT NULL AND embedding_model = $5
            THEN 1 - (embedding <=> $4::real[]::vector) END AS similarity
FROM consolidation.records
WHERE tenant_id = $1 AND agent_id = $2 AND entity = $3 AND retired_at IS NULL
ORDER BY record_id
FOR UPDATE
"""
INSERT_RECORD = """
INSERT INTO consolidation.records (
    tenant_id, record_id, agent_id, kind, entity, relation, text, original, language, importance, content_hash,
    explicit, valid_from, valid_until, pending, session_key, session_id, message_ids, origin, bank_path,
    embedding, embedding_model, rendered, bank_line)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
        $21::real[]::vector, $22, $23, $24)
"""
MERGE_PROVENANCE = """
UPDATE consolidation.records
SET message_ids = ARRAY(SELECT DISTINCT unnest(message_ids || $3::text[])),
    merged_ids = CASE WHEN $4::uuid IS NULL OR $4::uuid = ANY(merged_ids) THEN merged_ids
                      ELSE merged_ids || $4::uuid END
WHERE tenant_id = $1 AND record_id = $2
"""
# World time ends where the new value starts; transaction time ends now. Only current records are touched.
SUPERSEDE = """
UPDATE consolidation.records
SET retired_at = now(), retired_reason = 'superseded', superseded_by = $3,
    valid_until = COALESCE(valid_until, GREATEST($4, valid_from))
WHERE tenant_id = $1 AND record_id = ANY($2::uuid[]) AND retired_at IS NULL
"""
RETIRE = """
UPDATE consolidation.records
SET retired_at = now(), retired_reason = $3, valid_until = COALESCE(valid_until, GREATEST($4, valid_from)),
    bank_line = NULL
WHERE tenant_id = $1 AND record_id = $2 AND retired_at IS NULL
"""
SELECT_RECORD = """
SELECT record_id::text, agent_id, kind, entity, relation, text, original, language, importance, explicit,
       valid_from, session_key, session_id, message_ids, origin
FROM consolidation.records WHERE tenant_id = $1 AND record_id = $2
"""
# Current records of a bank file, and retired ones whose line may still be in it (`bank_line` not cleared yet).
SELECT_BANK = """
SELECT record_id::text, text, language, recorded_at, rendered, retired_at IS NULL AS current
FROM consolidation.records
WHERE tenant_id = $1 AND agent_id = $2 AND bank_path = $3 AND (retired_at IS NULL OR bank_line IS NOT NULL)
ORDER BY recorded_at, record_id
"""
PLACE = """
UPDATE consolidation.records AS r SET bank_line = p.line, rendered = p.rendered
FROM unnest($3::uuid[], $4::int[], $5::text[]) AS p(record_id, line, rendered)
WHERE r.tenant_id = $1 AND r.bank_path = $2 AND r.record_id = p.record_id
"""
CLEAR_RETIRED = """
UPDATE consolidation.records SET bank_line = NULL
WHERE tenant_id = $1 AND agent_id = $2 AND bank_path = $3 AND retired_at IS NOT NULL AND bank_line IS NOT NULL
"""
INSERT_REQUEST = """
INSERT INTO consolidation.record_requests (tenant_id, request_id, agent_id, ingest_seq, record_id, outcome)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT DO NOTHING
"""


@dataclass(frozen=True)
class NewRecord:
    record_id: str
    agent_id: str
    candidate: Candidate
    language: str
    content_hash: str
    bank_path: str
    vector: Sequence[float] | None
    model: str | None
    pending: str | None = None
    rendered: str | None = None  # set when the record is a person's line already in the bank
    bank_line: int | None = None


@dataclass(frozen=True)
class BankRow:
    record_id: str
    text: str
    language: str
    recorded_at: datetime
    rendered: str | None
    current: bool


class RecordStore(Protocol):
    async def neighbours(
        self, tenant: str, agent: str, entity: str, vector: Sequence[float] | None, model: str | None
    ) -> list[Neighbour]: ...
    async def insert(self, tenant: str, record: NewRecord) -> None: ...
    async def merge_provenance(
        self, tenant: str, record_id: str, message_ids: Sequence[str], merged_id: str | None
    ) -> None: ...
    async def supersede(self, tenant: str, old: Sequence[str], new: str, at: datetime) -> None: ...
    async def retire(self, tenant: str, record_id: str, at: datetime, reason: str) -> None: ...
    async def record(self, tenant: str, record_id: str) -> dict[str, Any] | None: ...
    async def bank(self, tenant: str, agent: str, path: str) -> list[BankRow]: ...
    async def place(self, tenant: str, agent: str, path: str, placements: dict[str, tuple[int, str]]) -> None: ...
    async def request_decided(
        self, tenant: str, request_id: str, agent: str, seq: int, record_id: str, outcome: str
    ) -> None: ...


class PostgresRecordStore:
    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    async def neighbours(
        self, tenant: str, agent: str, entity: str, vector: Sequence[float] | None, model: str | None
    ) -> list[Neighbour]:
        rows = await self._conn.fetch(
            SELECT_NEIGHBOURS, tenant, agent, entity, None if vector is None else list(vector), model
        )
        return [
            Neighbour(r["record_id"], r["kind"], r["entity"], r["relation"], r["content_hash"], r["valid_from"],
                      r["similarity"], r["text"])
            for r in rows
        ]  # fmt: skip

    async def insert(self, tenant: str, record: NewRecord) -> None:
        c, p = record.candidate, record.candidate.provenance
        await self._conn.execute(
            INSERT_RECORD, tenant, record.record_id, record.agent_id, c.kind, c.entity, c.relation, c.text,
            c.original, record.language, c.importance, record.content_hash, c.explicit,
            c.valid_from or p.occurred_at, c.valid_until, record.pending, p.session_key or None, p.session_id or None,
            list(p.message_ids), p.origin, record.bank_path,
            None if record.vector is None else list(record.vector), record.model, record.rendered, record.bank_line,
        )  # fmt: skip

    async def merge_provenance(
        self, tenant: str, record_id: str, message_ids: Sequence[str], merged_id: str | None
    ) -> None:
        await self._conn.execute(MERGE_PROVENANCE, tenant, record_id, list(message_ids), merged_id)

    async def supersede(self, tenant: str, old: Sequence[str], new: str, at: datetime) -> None:
        await self._conn.execute(SUPERSEDE, tenant, list(old), new, at)

    async def retire(self, tenant: str, record_id: str, at: datetime, reason: str) -> None:
        await self._conn.execute(RETIRE, tenant, record_id, reason, at)

    async def record(self, tenant: str, record_id: str) -> dict[str, Any] | None:
        row = await self._conn.fetchrow(SELECT_RECORD, tenant, record_id)
        return None if row is None else dict(row)

    async def bank(self, tenant: str, agent: str, path: str) -> list[BankRow]:
        rows = await self._conn.fetch(SELECT_BANK, tenant, agent, path)
        return [BankRow(**dict(r)) for r in rows]

    async def place(self, tenant: str, agent: str, path: str, placements: dict[str, tuple[int, str]]) -> None:
        ids = list(placements)
        lines = [placements[i][0] for i in ids]
        rendered = [placements[i][1] for i in ids]
        await self._conn.execute(PLACE, tenant, path, ids, lines, rendered)
        await self._conn.execute(CLEAR_RETIRED, tenant, agent, path)

    async def request_decided(
        self, tenant: str, request_id: str, agent: str, seq: int, record_id: str, outcome: str
    ) -> None:
        await self._conn.execute(INSERT_REQUEST, tenant, request_id, agent, seq, record_id, outcome)
