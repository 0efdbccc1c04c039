"""The full-text projection of messages. Terms come from the application tokenizer (CJK-aware) as a
tsvector literal: Postgres never re-tokenizes our text, so index and query use the same terms.

`message_row` is the one definition of what an indexed message holds; write paths call it and pass
its tuple to `INSERT_MESSAGE` (or its columns to a set-based insert), in `MESSAGE_COLUMNS` order."""

import uuid
from typing import Any

from cairn.events import TranscriptAppended
from cairn.text import message_vector

Connection = Any

SEARCHABLE_ROLES = ("user", "assistant")  # tool output and system text are stored, never indexed
MESSAGE_COLUMNS = (
    "tenant_id", "agent_id", "message_id", "session_key", "session_id", "position", "reset_index", "role",
    "chat_type", "text", "terms", "occurred_at", "ingest_seq", "external_id", "sender_name",
)  # fmt: skip
INSERT_MESSAGE = f"""
INSERT INTO indexer.messages ({", ".join(MESSAGE_COLUMNS)})
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::tsvector, $12, $13, $14, $15)
ON CONFLICT (tenant_id, message_id) DO NOTHING
"""
ADVANCE = """
INSERT INTO indexer.progress (tenant_id, agent_id, ingest_seq) VALUES ($1, $2, $3)
ON CONFLICT (tenant_id, agent_id) DO UPDATE
    SET ingest_seq = greatest(indexer.progress.ingest_seq, excluded.ingest_seq), updated_at = now()
"""


def is_searchable(event: TranscriptAppended) -> bool:
    return event.role in SEARCHABLE_ROLES


def message_row(event: TranscriptAppended) -> tuple[Any, ...]:
    """The indexed row of a searchable message, in `MESSAGE_COLUMNS` order (terms as a tsvector literal)."""
    return (
        uuid.UUID(event.tenant_id),
        event.agent_id,
        uuid.UUID(event.message_id),
        event.session_key,
        uuid.UUID(event.session_id),
        event.position,
        event.reset_index,
        event.role,
        event.chat_type,
        event.text,
        message_vector(event.text, event.sender_name),
        event.occurred_at,
        event.ingest_seq,
        event.external_id,
        event.sender_name,
    )


async def insert_message(conn: Connection, row: tuple[Any, ...]) -> None:
    await conn.execute(INSERT_MESSAGE, *row)


async def advance(conn: Connection, tenant: str, agent: str, ingest_seq: int | None) -> None:
    """Record that everything of this tenant up to `ingest_seq` is searchable (read-your-writes)."""
    if ingest_seq is not None:
        await conn.execute(ADVANCE, uuid.UUID(tenant), agent, ingest_seq)
