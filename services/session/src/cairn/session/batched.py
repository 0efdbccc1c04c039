"""The `Transcripts` port for a batch of events in one transaction, set-based, over one tenant or several
(every statement names each row's tenant; see `tenants_transaction`).

`prefetch` creates, locks and loads every session a run of messages touches, and looks up their adapter
ids, in one statement (`session.open_many`); `append` then allocates positions from the locked rows in memory
and buffers the entry; `flush` writes all buffered entries and every touched session in one statement. Anything
else (resets that read the window, rotations, forks, compaction, agent settings) flushes first and runs on
`PostgresTranscripts`, so it sees exactly what the plain store would.
"""

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import uuid_utils

from cairn.events import AgentConfig
from cairn.events.models import TranscriptLine
from cairn.session.store import (
    CopiedMessage,
    Entry,
    ForkSource,
    PostgresTranscripts,
    SessionRow,
    session_row,
)

# Creates (and remembers) the sessions of a run of messages, locks and loads them in key order, and finds the stored
# adapter ids: one round trip (session.open_many).
OPEN_MANY = "SELECT * FROM session.open_many($1, $2, $3, $4, $5, $6, $7, $8, $9)"
# The entries and the sessions' new state in one statement. The rows are locked by this transaction, so absolute
# values are what the per-message updates would reach. The entries travel as one array of records (session.entry_row):
# asyncpg checks each element of an array argument, so one array costs one check per entry where column arrays cost 16.
FLUSH = """
WITH appended AS (
    INSERT INTO session.entries (tenant_id, session_id, position, kind, message_id, channel, external_id, role, text,
        sender_name, peer_id, reset_index, token_estimate, occurred_at, recorded_at, ingest_seq)
    SELECT e.tenant_id, e.session_id, e.position, e.kind, e.message_id, e.channel, e.external_id, e.role, e.text,
        e.sender_name, e.peer_id, e.reset_index, e.token_estimate, e.occurred_at, e.recorded_at, e.ingest_seq
    FROM unnest($1::session.entry_row[]) AS e
)
UPDATE session.sessions s SET last_position = u.last_position, reset_index = u.reset_index,
    window_tokens = u.window_tokens, window_bytes = u.window_bytes, compaction_flagged = u.compaction_flagged,
    last_activity_at = u.last_activity_at, message_count = s.message_count + u.messages,
    status = CASE WHEN u.messages > 0 THEN 'active' ELSE s.status END, updated_at = now()
FROM unnest($2::uuid[], $3::uuid[], $4::int[], $5::int[], $6::bigint[], $7::bigint[], $8::bool[],
    $9::timestamptz[], $10::int[])
    AS u(tenant_id, session_id, last_position, reset_index, window_tokens, window_bytes, compaction_flagged,
         last_activity_at, messages)
WHERE s.tenant_id = u.tenant_id AND s.session_id = u.session_id
"""


def _new_id() -> str:
    """A random (v4) UUID as text, as `str(uuid.uuid4())` gives it at a fraction of the cost (per message)."""
    return str(uuid_utils.uuid4())


def _advanced(row: SessionRow, position: int, entry: Entry) -> SessionRow:
    """The row after appending a message at `position`. Built directly: `dataclasses.replace` of this 12-field
    frozen row costs twice as much, and it ran twice per message."""
    active = row.last_activity_at
    if entry.activity and (active is None or entry.occurred_at > active):
        active = entry.occurred_at
    return SessionRow(
        session_id=row.session_id, last_position=position, reset_index=row.reset_index,
        window_tokens=row.window_tokens + entry.token_estimate,
        window_bytes=row.window_bytes + len((entry.text or "").encode()), compaction_flagged=row.compaction_flagged,
        compaction_cycle=row.compaction_cycle, created=False, context_window=row.context_window,
        reset_policy=row.reset_policy, last_activity_at=active, compaction=row.compaction,
    )  # fmt: skip


@dataclass(frozen=True)
class Opening:
    """A session a message is about to open: created with these values when the key has none."""

    tenant: str
    agent: str
    key: str
    chat_type: str
    channel: str


class BatchedTranscripts:
    def __init__(self, conn: Any) -> None:
        self._conn, self._db = conn, PostgresTranscripts(conn)
        self._rows: dict[str, SessionRow] = {}  # by session id: the locked row as this batch has left it
        # session id → its tenant. Ids go to asyncpg as text, which its uuid codec parses in C: no uuid.UUID per value.
        self._tenants: dict[str, str] = {}
        self._keys: dict[tuple[str, str, str], str] = {}  # (tenant, agent, key) → session id
        self._new: set[str] = set()  # created by a prefetch; the first opening reports it
        self._seen: dict[tuple[str, str, str], bool] = {}  # (tenant, channel, external id) → stored?
        self._entries: list[tuple[Any, ...]] = []
        self._messages: dict[str, int] = {}  # touched session ids → messages appended

    async def prefetch(self, openings: list[Opening], external_ids: list[tuple[str, str, str]]) -> None:
        """Create, lock and load the sessions these messages open (of any tenant of the transaction); learn
        which adapter ids `(tenant, channel, external id)` are stored. One statement."""
        keyed = {(o.tenant, o.agent, o.key): o for o in openings}
        todo = [o for key, o in keyed.items() if key not in self._keys]
        triples = list(dict.fromkeys(p for p in external_ids if p not in self._seen))
        if not todo and not triples:
            return
        rows = await self._conn.fetch(
            OPEN_MANY, [o.tenant for o in todo], [o.agent for o in todo], [o.key for o in todo],
            [_new_id() for _ in todo], [o.chat_type for o in todo], [o.channel for o in todo],
            [t[0] for t in triples], [t[1] for t in triples], [t[2] for t in triples],
        )  # fmt: skip
        self._seen.update(dict.fromkeys(triples, False))
        for row in rows:
            if row["session_id"] is None:  # a stored adapter id
                self._seen[(str(row["tenant_id"]), row["channel"], row["external_id"])] = True
                continue
            if row["created"]:
                self._new.add(str(row["session_id"]))
            self._keep((str(row["tenant_id"]), row["agent_id"], row["session_key"]), session_row(row, created=False))

    def _keep(self, key: tuple[str, str, str], row: SessionRow) -> SessionRow:
        """Remember a locked row as current; handed out as `created` only once."""
        self._keys[key], self._rows[row.session_id] = row.session_id, replace(row, created=False)
        self._tenants[row.session_id] = key[0]
        return row

    async def open_session(self, tenant: str, agent: str, key: str, chat_type: str, channel: str) -> SessionRow:
        session_id = self._keys.get((tenant, agent, key))
        if session_id is None:  # not prefetched: the plain store reads what the buffer has written
            await self.flush(tenant)
            row = self._keep((tenant, agent, key), await self._db.open_session(tenant, agent, key, chat_type, channel))
        else:
            row = self._rows[session_id]  # kept with `created` False: handed out as it is, but the first time
        if row.session_id in self._new:
            self._new.discard(row.session_id)
            return replace(row, created=True)
        return row

    async def has_external_id(self, tenant: str, channel: str, external_id: str | None) -> bool:
        if external_id is None:
            return False
        known = self._seen.get((tenant, channel, external_id))
        return known if known is not None else await self._db.has_external_id(tenant, channel, external_id)

    async def append(self, tenant: str, session: SessionRow, entry: Entry) -> tuple[int, str]:
        current = self._rows[session.session_id]  # handlers append only to a session they opened
        position, message_id = current.last_position + 1, _new_id()
        if entry.kind == "reset":
            current = replace(current, last_position=position, reset_index=current.reset_index + 1,
                              window_tokens=0, window_bytes=0, compaction_flagged=False)  # fmt: skip
        else:
            current = _advanced(current, position, entry)
        self._rows[session.session_id] = current
        self._messages[session.session_id] = self._messages.get(session.session_id, 0) + (entry.kind == "message")
        if entry.external_id is not None:
            self._seen[(tenant, entry.channel, entry.external_id)] = True
        self._entries.append((
            self._tenants[session.session_id], session.session_id, position, entry.kind, message_id,
            entry.channel, entry.external_id, entry.role, entry.text, entry.sender_name, entry.peer_id,
            current.reset_index, entry.token_estimate, entry.occurred_at, entry.recorded_at, entry.ingest_seq,
        ))  # fmt: skip
        return position, message_id

    async def flag_compaction(self, tenant: str, session: SessionRow) -> None:
        self._rows[session.session_id] = replace(self._rows[session.session_id], compaction_flagged=True)
        self._messages.setdefault(session.session_id, 0)

    async def set_active_memory(self, tenant: str, session: SessionRow, enabled: bool) -> None:
        """A column the buffered flush never writes, of a row that exists (opened): no need to flush first."""
        await self._db.set_active_memory(tenant, session, enabled)

    async def flush(self, tenant: str | None = None) -> None:
        """Write the buffered entries and the touched sessions' new state, of every tenant: one statement."""
        if self._entries or self._messages:
            rows = [(self._rows[s], n) for s, n in self._messages.items()]
            await self._conn.execute(
                FLUSH, self._entries, [self._tenants[r.session_id] for r, _ in rows],
                [r.session_id for r, _ in rows],
                [r.last_position for r, _ in rows], [r.reset_index for r, _ in rows],
                [r.window_tokens for r, _ in rows], [r.window_bytes for r, _ in rows],
                [r.compaction_flagged for r, _ in rows], [r.last_activity_at for r, _ in rows], [n for _, n in rows],
            )  # fmt: skip
        self._entries, self._messages = [], {}

    async def _sync(self, tenant: str) -> None:
        """Before anything the buffer cannot answer: write it, and forget the rows (the plain store re-reads)."""
        await self.flush(tenant)
        self._rows, self._keys = {}, {}

    async def rotate(self, tenant: str, agent: str, key: str, session_id: str) -> SessionRow:
        await self._sync(tenant)
        return self._keep((tenant, agent, key), await self._db.rotate(tenant, agent, key, session_id))

    async def close_compaction(self, tenant: str, session: SessionRow, first_kept_position: int) -> None:
        await self._sync(tenant)
        await self._db.close_compaction(tenant, session, first_kept_position)

    async def window_tail(self, tenant: str, session: SessionRow, limit: int) -> tuple[TranscriptLine, ...]:
        await self.flush(tenant)
        return await self._db.window_tail(tenant, self._rows.get(session.session_id, session), limit)

    async def find_session(self, tenant: str, agent: str, key: str) -> SessionRow | None:
        await self._sync(tenant)
        return await self._db.find_session(tenant, agent, key)

    async def create_session(
        self, tenant: str, agent: str, key: str, session_id: str, chat_type: str, channel: str, parent_id: str | None
    ) -> SessionRow:
        await self._sync(tenant)
        return await self._db.create_session(tenant, agent, key, session_id, chat_type, channel, parent_id)

    async def find_message(self, tenant: str, session: SessionRow, message_id: str) -> ForkSource | None:
        await self._sync(tenant)
        return await self._db.find_message(tenant, session, message_id)

    async def copy_messages(
        self,
        tenant: str,
        parent: SessionRow,
        source: ForkSource,
        child: SessionRow,
        recorded_at: datetime,
        ingest_seq: int,
    ) -> list[CopiedMessage]:
        await self._sync(tenant)
        return await self._db.copy_messages(tenant, parent, source, child, recorded_at, ingest_seq)

    async def save_agent_settings(self, tenant: str, agent: str, version: int, config: AgentConfig) -> None:
        await self._sync(tenant)  # cached rows carry the agent's settings
        await self._db.save_agent_settings(tenant, agent, version, config)
