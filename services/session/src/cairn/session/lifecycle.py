"""Sessions age: active → dormant → archived after configured quiet periods; a message wakes them."""

import asyncio
import logging
from datetime import timedelta

import asyncpg

log = logging.getLogger(__name__)

SWEEP = "SELECT dormant, archived FROM session.sweep_lifecycle($1, $2, $3)"


class LifecycleSweeper:
    """A background loop of the session service; idempotent, so every replica may run it."""

    consumer = "session-lifecycle"
    stream = "-"

    def __init__(
        self, pool: "asyncpg.Pool[asyncpg.Record]", dormant_after: timedelta, archive_after: timedelta, every_s: float
    ) -> None:
        self._pool, self._dormant, self._archive, self._every = pool, dormant_after, archive_after, every_s

    async def sweep(self, tenant: str | None = None) -> tuple[int, int]:
        """Age every tenant's sessions (or one tenant's); returns how many became dormant and archived."""
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(SWEEP, self._dormant, self._archive, tenant)
        assert row is not None
        return int(row["dormant"]), int(row["archived"])

    async def run(self) -> None:
        while True:
            try:
                dormant, archived = await self.sweep()
                if dormant or archived:
                    log.info("lifecycle: %d sessions became dormant, %d archived", dormant, archived)
            except (OSError, asyncpg.PostgresError) as error:  # the next sweep catches up; nothing is lost
                log.error("lifecycle sweep failed: %s", error)
            await asyncio.sleep(self._every)
