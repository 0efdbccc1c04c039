"""The full-text projection of messages. Terms come from the application tokenizer (CJK-aware) as a
tsvector literal: Postgres never re-tokenizes our text, so index and query use the same terms."""

import uuid
from typing import Any

Connection = Any

INSERT_MESSAGE = """
INSERT INTO indexer.messages (tenant_id, agent_id, message_id, session_key, session_id, position, reset_index, role,
    chat_type, text, terms, occurred_at, ingest_seq)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::tsvector, $12, $13)
ON CONFLICT (tenant_id, message_id) DO NOTHING
"""
ADVANCE = """
INSERT INTO indexer.progress (tenant_id, agent_id, ingest_seq) VALUES ($1, $2, $3)
ON CONFLICT (tenant_id, agent_id) DO UPDATE
    SET ingest_seq = greatest(indexer.progress.ingest_seq, excluded.ingest_seq), updated_at = now()
"""


async def insert_message(conn: Connection, row: tuple[Any, ...]) -> None:
    await conn.execute(INSERT_MESSAGE, *row)


async def advance(conn: Connection, tenant: str, agent: str, ingest_seq: int | None) -> None:
    """Record that everything of this tenant up to `ingest_seq` is searchable (read-your-writes)."""
    if ingest_seq is not None:
        await conn.execute(ADVANCE, uuid.UUID(tenant), agent, ingest_seq)
