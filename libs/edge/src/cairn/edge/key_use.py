"""When each key was last used, written cheaply: at most once a minute per key and process (and the statement
itself skips a key another replica marked within the minute), never a write per request."""

import time
import uuid

import asyncpg

from cairn.storage.postgres import tenant_transaction

TOUCH_EVERY_S = 60.0
TOUCH = """
UPDATE ingest.api_keys SET last_used_at = now()
WHERE key_id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
"""
KEYS_TRACKED = 100_000  # keys one process remembers marking; forgetting only means marking one more time


class KeyUse:
    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]", every_s: float = TOUCH_EVERY_S) -> None:
        self._pool, self._every_s = pool, every_s
        self._marked: dict[str, float] = {}

    async def note(self, tenant: str, key_id: str) -> None:
        now = time.monotonic()
        if now - self._marked.get(key_id, -self._every_s) < self._every_s:
            return
        if len(self._marked) >= KEYS_TRACKED:
            self._marked.clear()
        self._marked[key_id] = now
        async with tenant_transaction(self._pool, tenant) as conn:
            await conn.execute(TOUCH, uuid.UUID(key_id))
