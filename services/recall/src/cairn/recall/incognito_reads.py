"""History reads of an incognito thread: the same questions `HistoryReads` answers from Postgres,
answered from the thread as ingest keeps it in Redis (`cairn.events.incognito`), read once per
request so that one page sees one consistent thread."""

import uuid
from collections.abc import Sequence

from redis.asyncio import Redis

from cairn.events.incognito import IncognitoThread, StoredEntry, stored_entry, thread_keys
from cairn.recall.history import StoredMessage
from cairn.recall.history_queries import SessionHead

# KEYS: meta, log. Returns {} when there is no thread, else {meta as a flat list, entries}.
READ = """
local meta = redis.call('hgetall', KEYS[1])
if #meta == 0 then return {} end
return {meta, redis.call('lrange', KEYS[2], 0, -1)}
"""


async def read_thread(redis: "Redis", tenant: str, agent: str, session_key: str) -> IncognitoThread | None:
    """The whole thread, read atomically (one consistent view); None when it is not live."""
    meta, log, _ = thread_keys(tenant, agent, session_key)
    found = await redis.eval(READ, 2, meta, log)
    if not found:
        return None
    flat, raw_entries = found
    head = {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}
    return IncognitoThread(
        session_key=session_key,
        session_id=head["session_id"],
        parent_session_key=head["parent"] or None,
        reset_index=int(head["reset_index"]),
        entries=[stored_entry(raw) for raw in raw_entries],
    )


class IncognitoReads:
    def __init__(self, thread: IncognitoThread | None) -> None:
        self._thread = thread

    async def session(self, agent: str, key: str) -> SessionHead | None:
        thread = self._thread
        return SessionHead(thread.session_id, thread.reset_index) if thread is not None else None

    async def earlier_session(self, agent: str, key: str, session_id: uuid.UUID) -> SessionHead | None:
        return None  # an incognito thread never changes its id: it has no daily or idle resets

    def _messages(self, roles: Sequence[str]) -> list[StoredEntry]:
        entries = self._thread.entries if self._thread is not None else []
        return [e for e in entries if e.entry.kind == "message" and e.entry.role in roles]

    async def anchor_window(self, session_id: str, message_id: str) -> int | None:
        entries = self._thread.entries if self._thread is not None else []
        return next(
            (e.reset_index for e in entries if message_id in (e.entry.message_id, e.entry.external_id)),
            None,
        )

    async def has_earlier_windows(self, session_id: str, window: int, roles: Sequence[str]) -> bool:
        return any(e.reset_index < window for e in self._messages(roles))

    async def newest_messages(
        self, session_id: str, window: int, roles: Sequence[str], limit: int, offset: int
    ) -> list[StoredMessage]:
        newest_first = [e for e in reversed(self._messages(roles)) if e.reset_index == window]
        return [
            StoredMessage(
                e.entry.message_id, e.entry.role or "", e.entry.sender_name, e.entry.text or "", e.entry.occurred_at,
                e.entry.recorded_at, e.position,
            )
            for e in newest_first[offset : offset + limit]
        ]  # fmt: skip
