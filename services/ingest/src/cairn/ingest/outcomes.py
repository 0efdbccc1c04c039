"""What consolidation decided for a memory write, read back from its `write_outcomes` table (row-level
security applies), so that a PUT, POST or DELETE can answer with the version, 409, 404 or 413.

Consolidation alone applies writes, one request at a time per document, and records each request's
outcome in the transaction that applies it: the answer is never a guess made beside the write. Ingest
waits for that row, bounded; past the bound the write is still durably queued and the client is told so
(202, `pending`), never that it failed.
"""

import asyncio
import time
from typing import cast

import asyncpg

from cairn.ingest.memory import Change, Decided, Outcome
from cairn.storage.postgres import tenant_transaction

GET_OUTCOME = """
SELECT outcome, version, change, detail FROM consolidation.write_outcomes WHERE tenant_id = $1 AND request_id = $2
"""
FIRST_POLL_S = 0.005
LONGEST_POLL_S = 0.02


class WriteOutcomes:
    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]") -> None:
        self._pool = pool

    async def get(self, tenant: str, request_id: str) -> Decided | None:
        async with tenant_transaction(self._pool, tenant) as conn:
            row = await conn.fetchrow(GET_OUTCOME, tenant, request_id)
        if row is None:
            return None
        # consolidation writes only these outcomes and changes (and a CHECK constraint holds it to them)
        return Decided(cast(Outcome, row["outcome"]), row["version"], cast(Change | None, row["change"]), row["detail"])

    async def wait(self, tenant: str, request_id: str, bound_s: float) -> Decided | None:
        """The outcome once consolidation has recorded it, or None when `bound_s` passes first."""
        deadline = time.monotonic() + bound_s
        pause = FIRST_POLL_S
        while True:
            decided = await self.get(tenant, request_id)
            if decided is not None or time.monotonic() >= deadline:
                return decided
            await asyncio.sleep(pause)
            pause = min(pause * 2, LONGEST_POLL_S)
