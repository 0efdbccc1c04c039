"""SQL of the memory index (schema `indexer`), run on the connection of a tenant transaction.

Chunks are replaced per document, or per transcript tail, in one transaction with the count the search
uses to choose between an exact scan and the shared HNSW index.
"""

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from typing import Any

import numpy as np

from cairn.memindex.embeddings import Vectors
from cairn.memindex.transcripts import Turn
from cairn.storage.postgres import MEMORY_PROGRESS_CHANNEL

Connection = Any

INSERT_CHUNK = """
INSERT INTO indexer.memory_chunks (tenant_id, agent_id, source, path, version, session_key, session_id, start_line,
    end_line, text, terms, content_hash, message_ids, dated, occurred_at, model, dims, embedding, external_ids, context)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::tsvector, $12, $13, $14, $15, $16, $17, $18::real[]::vector,
        $19, $20)
"""
KNOWN_VECTORS = """
SELECT DISTINCT ON (content_hash) content_hash, embedding::real[] AS embedding FROM indexer.memory_chunks
WHERE tenant_id = $1 AND model = $2 AND content_hash = ANY($3::bytea[])
"""
DOCUMENT_VERSION = "SELECT max(version) FROM indexer.memory_chunks WHERE tenant_id = $1 AND agent_id = $2 AND path = $3"
DELETE_DOCUMENT = "DELETE FROM indexer.memory_chunks WHERE tenant_id = $1 AND agent_id = $2 AND path = $3"
COUNT_CHUNKS = """
INSERT INTO indexer.memory_counts AS c (tenant_id, agent_id, chunks) VALUES ($1, $2, $3)
ON CONFLICT (tenant_id, agent_id) DO UPDATE SET chunks = greatest(c.chunks + excluded.chunks, 0)
"""
INSERT_TURN = """
INSERT INTO indexer.memory_turns (tenant_id, agent_id, session_id, position, reset_index, session_key, message_id,
    role, sender_name, text, occurred_at, external_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT DO NOTHING
"""
# Debounced: every new turn pushes the session's due time back, but never past first_at + max delay.
MARK_PENDING = """
INSERT INTO indexer.memory_pending AS p (tenant_id, agent_id, session_id, session_key, first_at, first_seq, due_at)
VALUES ($1, $2, $3, $4, now(), $7, now() + make_interval(secs => $5))
ON CONFLICT (tenant_id, session_id) DO UPDATE
SET due_at = least(now() + make_interval(secs => $5), p.first_at + make_interval(secs => $6)),
    first_seq = least(p.first_seq, excluded.first_seq)
"""
# recall's memory read-your-writes waits listen on the channel (delivered at the commit); see WRITE_TRANSCRIPT_BATCH
# and DONE_PENDING too
ADVANCE = f"""
WITH advanced AS (
    INSERT INTO indexer.memory_progress AS m (tenant_id, agent_id, ingest_seq) VALUES ($1, $2, $3)
    ON CONFLICT (tenant_id, agent_id) DO UPDATE
    SET ingest_seq = greatest(m.ingest_seq, excluded.ingest_seq), updated_at = now()
    RETURNING 1
)
SELECT pg_notify('{MEMORY_PROGRESS_CHANNEL}', '') WHERE EXISTS (SELECT FROM advanced)
"""
# The same three, set-based, for a fetched batch of transcript events of any tenants (one row per session
# in MARK_PENDING_MANY and per agent in ADVANCE_MANY: an upsert may touch a row only once per statement).
# The turns travel as one array of indexer.turn_row records (schema/V0001__baseline.sql), in the table's column order:
# asyncpg checks each element of an array argument, so one array costs one check per turn where column arrays cost 12.
INSERT_TURNS = """
INSERT INTO indexer.memory_turns (tenant_id, agent_id, session_id, position, reset_index, session_key, message_id,
    role, sender_name, text, occurred_at, external_id)
SELECT * FROM unnest($1::indexer.turn_row[])
ON CONFLICT DO NOTHING
"""
# A session of an agent whose stored setting does not remember gets no mark: the worker would only drop it again
# (schema/R__take_due_memory_sessions.sql), and meanwhile it held back the agent's memory read-your-writes. The setting
# is read FOR SHARE: a transaction turning remembering on (it marks every session of the agent it can see) waits for
# this one, or this one waits for it and then reads the new setting, so no session is left unmarked. No stored setting
# remembers.
MARK_PENDING_MANY = """
INSERT INTO indexer.memory_pending AS p (tenant_id, agent_id, session_id, session_key, first_at, first_seq, due_at)
SELECT tenant_id, agent_id, session_id, session_key, now(), first_seq, now() + make_interval(secs => $5::float8)
FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::text[], $7::bigint[])
    AS s(tenant_id, agent_id, session_id, session_key, first_seq)
WHERE NOT EXISTS (
    SELECT FROM indexer.memory_agents a
    WHERE a.tenant_id = s.tenant_id AND a.agent_id = s.agent_id AND NOT a.remember
    FOR SHARE
)
ON CONFLICT (tenant_id, session_id) DO UPDATE
SET due_at = least(now() + make_interval(secs => $5::float8), p.first_at + make_interval(secs => $6::float8)),
    first_seq = least(p.first_seq, excluded.first_seq)
"""
ADVANCE_MANY = """
INSERT INTO indexer.memory_progress AS m (tenant_id, agent_id, ingest_seq)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[])
ON CONFLICT (tenant_id, agent_id) DO UPDATE
SET ingest_seq = greatest(m.ingest_seq, excluded.ingest_seq), updated_at = now()
RETURNING 1
"""


def _shifted(sql: str, by: int) -> str:
    """`sql` with its parameters renumbered from `$1 + by`."""
    return re.sub(r"\$(\d+)", lambda m: f"${int(m.group(1)) + by}", sql)


# A fetched batch's turns, debounce marks and positions in one statement (one round trip instead of three):
# data-modifying CTEs all run, to completion, whether or not the outer statement reads them.
WRITE_TRANSCRIPT_BATCH = f"""
WITH turns AS ({INSERT_TURNS.strip()}),
pending AS ({_shifted(MARK_PENDING_MANY, 1).strip()}),
advanced AS ({_shifted(ADVANCE_MANY, 8).strip()})
SELECT pg_notify('{MEMORY_PROGRESS_CHANNEL}', '') WHERE EXISTS (SELECT FROM advanced)
"""
CLAIM_PENDING = """
SELECT agent_id, due_at FROM indexer.memory_pending WHERE tenant_id = $1 AND session_id = $2
FOR UPDATE SKIP LOCKED
"""
DONE_PENDING = f"""
WITH done AS (DELETE FROM indexer.memory_pending WHERE tenant_id = $1 AND session_id = $2 RETURNING 1)
SELECT pg_notify('{MEMORY_PROGRESS_CHANNEL}', '') WHERE EXISTS (SELECT FROM done)
"""
LAST_CHUNK_START = """
SELECT coalesce(max(start_line), 0) FROM indexer.memory_chunks
WHERE tenant_id = $1 AND session_id = $2 AND session_id IS NOT NULL
"""
TURNS_FROM = """
SELECT position, reset_index, message_id::text, role, sender_name, text, occurred_at, session_key, external_id
FROM indexer.memory_turns WHERE tenant_id = $1 AND session_id = $2 AND position >= $3
ORDER BY position LIMIT $4
"""
DELETE_SESSION_FROM = """
DELETE FROM indexer.memory_chunks WHERE tenant_id = $1 AND session_id = $2 AND start_line >= $3
AND session_id IS NOT NULL
"""
REMEMBER = "SELECT remember FROM indexer.memory_agents WHERE tenant_id = $1 AND agent_id = $2"
SAVE_REMEMBER = """
INSERT INTO indexer.memory_agents AS a (tenant_id, agent_id, remember, config_version) VALUES ($1, $2, $3, $4)
ON CONFLICT (tenant_id, agent_id) DO UPDATE SET remember = excluded.remember, config_version = excluded.config_version
WHERE a.config_version <= excluded.config_version
RETURNING remember
"""
DELETE_AGENT_SESSIONS = """
DELETE FROM indexer.memory_chunks WHERE tenant_id = $1 AND agent_id = $2 AND source = 'sessions'
"""
AGENT_SESSIONS = """
SELECT session_id, min(session_key) AS session_key FROM indexer.memory_turns
WHERE tenant_id = $1 AND agent_id = $2 GROUP BY session_id
"""
# A chunk is embedded with its context (`ChunkRow.searched`), so it is re-embedded with it too.
STALE_CHUNKS = """
SELECT chunk_id, content_hash, concat_ws(E'\n', context, text) AS text FROM indexer.memory_chunks
WHERE tenant_id = $1 AND agent_id = $2 AND model IS DISTINCT FROM $3
LIMIT $4
"""
STALE_TURNS = """
SELECT t.session_id, t.position, t.reset_index, t.message_id::text, t.role, t.sender_name, t.text, t.occurred_at,
       t.external_id, b.position AS b_position, b.reset_index AS b_reset_index, b.message_id::text AS b_message_id,
       b.role AS b_role, b.sender_name AS b_sender_name, b.text AS b_text, b.occurred_at AS b_occurred_at,
       b.external_id AS b_external_id
FROM indexer.memory_turns t
LEFT JOIN LATERAL (
    SELECT * FROM indexer.memory_turns p
    WHERE p.tenant_id = t.tenant_id AND p.session_id = t.session_id AND p.position < t.position
    ORDER BY p.position DESC LIMIT 1
) b ON true
WHERE t.tenant_id = $1 AND t.agent_id = $2 AND (t.model < $3 OR t.model > $3)
LIMIT $4
"""
TURNS_WITHOUT_VECTOR = """
SELECT position FROM indexer.memory_turns
WHERE tenant_id = $1 AND session_id = $2 AND position >= $3 AND model IS DISTINCT FROM $4
"""
SET_TURN_VECTOR = """
UPDATE indexer.memory_turns SET model = $4, embedding = $5::real[]::vector
WHERE tenant_id = $1 AND session_id = $2 AND position = $3
"""
SET_VECTOR = """
UPDATE indexer.memory_chunks SET model = $3, dims = $4, embedding = $5::real[]::vector
WHERE tenant_id = $1 AND chunk_id = $2
"""


@dataclass(frozen=True)
class ChunkRow:
    """One chunk as stored; `message_ids` are the transcript entries it was cut from."""

    source: str
    start_line: int
    end_line: int
    text: str
    terms: str
    content_hash: bytes
    path: str | None = None
    version: int | None = None
    session_key: str | None = None
    session_id: uuid.UUID | None = None
    message_ids: tuple[uuid.UUID, ...] = ()
    external_ids: tuple[str | None, ...] = ()
    dated: date | None = None
    occurred_at: datetime | None = None
    context: str | None = None  # the headings and parent items above a document's entry (`entries`)

    @property
    def searched(self) -> str:
        return searched_text(self.context, self.text)


def searched_text(context: str | None, text: str) -> str:
    """What a chunk's vector and words are made of: its context, then its own lines (as STALE_CHUNKS reads it)."""
    return f"{context}\n{text}" if context else text


async def known_vectors(conn: Connection, tenant: uuid.UUID, model: str, hashes: Sequence[bytes]) -> dict[bytes, Any]:
    rows = await conn.fetch(KNOWN_VECTORS, tenant, model, list(hashes))
    return {bytes(row["content_hash"]): row["embedding"] for row in rows}


async def insert_chunks(
    conn: Connection,
    tenant: uuid.UUID,
    agent: str,
    rows: Sequence[ChunkRow],
    model: str | None,
    vectors: Vectors | None,
) -> None:
    """One pipelined batch: HNSW insertion costs milliseconds per row, round trips should not add to it."""
    if vectors is None:
        model, dims, embeddings = None, None, [None] * len(rows)
    else:
        dims, embeddings = int(vectors.shape[1]), vectors.tolist()
    await conn.executemany(
        INSERT_CHUNK,
        [
            (tenant, agent, r.source, r.path, r.version, r.session_key, r.session_id, r.start_line, r.end_line, r.text,
             r.terms, r.content_hash, list(r.message_ids), r.dated, r.occurred_at, model, dims, embeddings[i],
             list(r.external_ids), r.context)
            for i, r in enumerate(rows)
        ],
    )  # fmt: skip
    await count(conn, tenant, agent, len(rows))


async def count(conn: Connection, tenant: uuid.UUID, agent: str, delta: int) -> None:
    if delta:
        await conn.execute(COUNT_CHUNKS, tenant, agent, delta)


def deleted(status: str) -> int:
    """Rows removed, from asyncpg's command status (`DELETE 12`)."""
    return int(status.rsplit(" ", 1)[-1])


async def document_version(conn: Connection, tenant: uuid.UUID, agent: str, path: str) -> int | None:
    version: int | None = await conn.fetchval(DOCUMENT_VERSION, tenant, agent, path)
    return version


async def delete_document(conn: Connection, tenant: uuid.UUID, agent: str, path: str) -> int:
    removed = deleted(await conn.execute(DELETE_DOCUMENT, tenant, agent, path))
    await count(conn, tenant, agent, -removed)
    return removed


async def add_turn(
    conn: Connection, tenant: uuid.UUID, agent: str, session_id: uuid.UUID, key: str, turn: Turn
) -> None:
    await conn.execute(
        INSERT_TURN, tenant, agent, session_id, turn.position, turn.reset_index, key, uuid.UUID(turn.message_id),
        turn.role, turn.sender_name, turn.text, turn.occurred_at, turn.external_id,
    )  # fmt: skip


async def mark_pending(
    conn: Connection,
    tenant: uuid.UUID,
    agent: str,
    session: tuple[uuid.UUID, str],
    delays: tuple[float, float],
    ingest_seq: int | None = None,
) -> None:
    """Due after the debounce; `ingest_seq` (the turn's write position) holds back read-your-writes."""
    await conn.execute(MARK_PENDING, tenant, agent, session[0], session[1], *delays, ingest_seq)


async def advance(conn: Connection, tenant: uuid.UUID, agent: str, ingest_seq: int | None) -> None:
    if ingest_seq is not None:
        await conn.execute(ADVANCE, tenant, agent, ingest_seq)


@dataclass(frozen=True)
class Pending:
    """A session whose debounce a batch pushes back: its key and the lowest ingest position of its new turns."""

    agent: str
    session_key: str
    first_seq: int | None


async def write_transcript_batch(
    conn: Connection,
    turns: Sequence[tuple[Any, ...]],
    pending: Mapping[tuple[uuid.UUID, uuid.UUID], Pending],
    delays: tuple[float, float],
    reached: Mapping[tuple[uuid.UUID, str], int],
) -> None:
    """A batch of transcript events of any tenants of the transaction, in one statement:
    - `turns` as `(tenant, agent, session id, key, Turn)`; a turn stored before (same position or message) is
      left as it is;
    - `mark_pending` for each `(tenant, session id)`, unless the agent's stored setting does not remember (no mark
      for the worker to drop; see MARK_PENDING_MANY);
    - `advance` for each `(tenant, agent)`."""
    if not (turns or pending or reached):
        return
    # message ids stay the event's text: asyncpg encodes a uuid from text in C, no uuid.UUID per turn
    rows = [(tenant, agent, session_id, t.position, t.reset_index, key, t.message_id, t.role, t.sender_name, t.text,
             t.occurred_at, t.external_id)
            for tenant, agent, session_id, key, t in turns]  # fmt: skip
    keys, marks = list(pending), list(pending.values())
    await conn.execute(
        WRITE_TRANSCRIPT_BATCH,
        rows,
        [t for t, _ in keys], [p.agent for p in marks], [s for _, s in keys], [p.session_key for p in marks],
        *delays, [p.first_seq for p in marks],
        [t for t, _ in reached], [a for _, a in reached], list(reached.values()),
    )  # fmt: skip


async def claim_pending(conn: Connection, tenant: uuid.UUID, session_id: uuid.UUID) -> str | None:
    """The agent of a due session, locked for this transaction; None when another worker holds it."""
    row = await conn.fetchrow(CLAIM_PENDING, tenant, session_id)
    return None if row is None else str(row["agent_id"])


async def finish_pending(conn: Connection, tenant: uuid.UUID, session_id: uuid.UUID) -> None:
    await conn.execute(DONE_PENDING, tenant, session_id)


async def remembers(conn: Connection, tenant: uuid.UUID, agent: str) -> bool:
    """An agent never configured has the default config (dm_scope main): it remembers."""
    remember = await conn.fetchval(REMEMBER, tenant, agent)
    return True if remember is None else bool(remember)


async def save_remember(conn: Connection, tenant: uuid.UUID, agent: str, remember: bool, version: int) -> bool | None:
    """Store the setting unless a newer config is stored already; returns what is now in force (None: stale)."""
    value = await conn.fetchval(SAVE_REMEMBER, tenant, agent, remember, version)
    return None if value is None else bool(value)


async def session_tail(
    conn: Connection, tenant: uuid.UUID, session_id: uuid.UUID, limit: int | None = None
) -> tuple[int, list[Turn], str, bool]:
    """Where the session's last chunk starts, the turns from there on (at most `limit`), the session's key,
    and whether more turns follow."""
    start = int(await conn.fetchval(LAST_CHUNK_START, tenant, session_id))
    rows = await conn.fetch(TURNS_FROM, tenant, session_id, start, None if limit is None else limit + 1)
    more = limit is not None and len(rows) > limit
    turns = [_turn(r) for r in rows[:limit]]
    return start, turns, (rows[-1]["session_key"] if rows else ""), more


async def delete_session_from(
    conn: Connection, tenant: uuid.UUID, agent: str, session_id: uuid.UUID, start: int
) -> int:
    removed = deleted(await conn.execute(DELETE_SESSION_FROM, tenant, session_id, start))
    await count(conn, tenant, agent, -removed)
    return removed


async def forget_sessions(conn: Connection, tenant: uuid.UUID, agent: str) -> int:
    removed = deleted(await conn.execute(DELETE_AGENT_SESSIONS, tenant, agent))
    await count(conn, tenant, agent, -removed)
    return removed


async def agent_sessions(conn: Connection, tenant: uuid.UUID, agent: str) -> list[tuple[uuid.UUID, str]]:
    rows = await conn.fetch(AGENT_SESSIONS, tenant, agent)
    return [(r["session_id"], r["session_key"]) for r in rows]


async def stale_chunks(conn: Connection, tenant: uuid.UUID, agent: str, model: str, limit: int) -> list[Any]:
    return list(await conn.fetch(STALE_CHUNKS, tenant, agent, model, limit))


async def stale_turns(
    conn: Connection, tenant: uuid.UUID, agent: str, model: str, limit: int
) -> list[tuple[uuid.UUID, Turn | None, Turn]]:
    """Turns whose vector is of another model (a turn without one is not chunked yet: it gets one then), each
    with the turn before it in its session (None for the first), which its vector reads it after."""
    rows = await conn.fetch(STALE_TURNS, tenant, agent, model, limit)
    return [(r["session_id"], None if r["b_position"] is None else _turn(r, "b_"), _turn(r)) for r in rows]


def _turn(r: Any, prefix: str = "") -> Turn:
    fields = ("position", "reset_index", "message_id", "role", "sender_name", "text", "occurred_at", "external_id")
    turn = Turn(*(r[prefix + f] for f in fields))
    return turn if turn.occurred_at.tzinfo is not None else replace(turn, occurred_at=aware(turn.occurred_at))


def aware(stored: datetime) -> datetime:
    """asyncpg reads a timestamptz `infinity` or `-infinity` as the naive `datetime.max` or `datetime.min`, which
    cannot be compared with any other time: an older release stored 0001-01-01T00:00:00Z that way (issue 28).
    Read as the latest or earliest UTC instant, such a turn is one more sitting, and never stops the worker."""
    return stored if stored.tzinfo is not None else stored.replace(tzinfo=UTC)


async def set_vectors(
    conn: Connection, tenant: uuid.UUID, chunk_ids: Sequence[uuid.UUID], model: str, vectors: Vectors
) -> None:
    dims = int(vectors.shape[1])
    await conn.executemany(
        SET_VECTOR, [(tenant, chunk_id, model, dims, vectors[i].tolist()) for i, chunk_id in enumerate(chunk_ids)]
    )


async def turns_without_vector(
    conn: Connection, tenant: uuid.UUID, session_id: uuid.UUID, start: int, model: str
) -> set[int]:
    rows = await conn.fetch(TURNS_WITHOUT_VECTOR, tenant, session_id, start, model)
    return {int(r["position"]) for r in rows}


async def set_turn_vectors(
    conn: Connection, tenant: uuid.UUID, session_id: uuid.UUID, positions: Sequence[int], model: str, vectors: Vectors
) -> None:
    rows = vectors.tolist()
    await conn.executemany(
        SET_TURN_VECTOR, [(tenant, session_id, position, model, rows[i]) for i, position in enumerate(positions)]
    )


def as_vectors(rows: Sequence[Any]) -> Vectors:
    return np.asarray(rows, dtype=np.float32)
