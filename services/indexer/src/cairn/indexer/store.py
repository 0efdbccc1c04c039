"""The full-text projection of messages. Terms come from the application tokenizer (CJK-aware) as a
tsvector literal: Postgres never re-tokenizes our text, so index and query use the same terms.

`message_row` is the one definition of what an indexed message holds, in `MESSAGE_COLUMNS` order; a batch's
rows go in with one INSERT … SELECT FROM unnest of one array of records (`insert_messages`), its positions with
one upsert."""

from collections.abc import Mapping, Sequence
from typing import Any

from cairn.events import TranscriptAppended
from cairn.storage.postgres import INDEX_PROGRESS_CHANNEL
from cairn.text import message_vector

Connection = Any

SEARCHABLE_ROLES = ("user", "assistant")  # tool output and system text are stored, never indexed
MESSAGE_COLUMNS = (
    "tenant_id", "agent_id", "message_id", "session_key", "session_id", "position", "reset_index", "role",
    "chat_type", "text", "terms", "occurred_at", "ingest_seq", "external_id", "sender_name",
)  # fmt: skip
# A batch's rows travel as one array of indexer.message_row records (schema/V0001__baseline.sql), whose fields are
# MESSAGE_COLUMNS in order: asyncpg checks each element of an array argument, so one array costs one check per row
# where column arrays cost 15. Terms travel as text, cast to tsvector in the SELECT.
INSERT_MESSAGES = f"""
INSERT INTO indexer.messages ({", ".join(MESSAGE_COLUMNS)})
SELECT {", ".join("m.terms::tsvector" if c == "terms" else f"m.{c}" for c in MESSAGE_COLUMNS)}
FROM unnest($1::indexer.message_row[]) AS m
ON CONFLICT (tenant_id, message_id) DO NOTHING
"""
# recall's read-your-writes waits listen on the channel: woken at the commit instead of at their next poll
ADVANCE = f"""
WITH advanced AS (
    INSERT INTO indexer.progress (tenant_id, agent_id, ingest_seq)
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[]) AS p(tenant_id, agent_id, ingest_seq)
    ON CONFLICT (tenant_id, agent_id) DO UPDATE
        SET ingest_seq = greatest(indexer.progress.ingest_seq, excluded.ingest_seq), updated_at = now()
    RETURNING 1
)
SELECT pg_notify('{INDEX_PROGRESS_CHANNEL}', '') WHERE EXISTS (SELECT FROM advanced)
"""


def is_searchable(event: TranscriptAppended) -> bool:
    return event.role in SEARCHABLE_ROLES


def message_row(event: TranscriptAppended) -> tuple[Any, ...]:
    """The indexed row of a searchable message, in `MESSAGE_COLUMNS` order (terms as a tsvector literal). Ids stay
    the event's text (validated as UUIDs when it was decoded): asyncpg encodes a uuid from text in C, cheaper
    than building a `uuid.UUID` and encoding its bytes."""
    return (
        event.tenant_id,
        event.agent_id,
        event.message_id,
        event.session_key,
        event.session_id,
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


async def insert_messages(conn: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Rows from `message_row`, of any tenants of the transaction; a message indexed before is left as it is."""
    if rows:
        await conn.execute(INSERT_MESSAGES, rows)


async def advance(conn: Connection, reached: Mapping[tuple[str, str], int]) -> None:
    """Record that everything of each (tenant, agent) up to its ingest position is searchable (read-your-writes)."""
    if reached:
        tenants, agents = [t for t, _ in reached], [a for _, a in reached]  # uuid text, as in `message_row`
        await conn.execute(ADVANCE, tenants, agents, list(reached.values()))
