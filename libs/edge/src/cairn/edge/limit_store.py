"""Where a tenant's limits and what it has stored are read: the operator's overrides in `cairn.tenant_limits`
(platform schema, V0003), all of them read at once and anew every `limits_cache_s` behind the requests (one small
read per process however many tenants send requests), so that a change reaches every replica within a few
seconds; and the stored bytes and memory documents counted from what is stored, reused for `usage_cache_s` and
read anew behind the requests that use them."""

import asyncio
import logging
import time
from dataclasses import dataclass

import asyncpg

from cairn.edge.settings import LimitSettings
from cairn.edge.tenant_limits import EffectiveLimits, LimitOverride, effective_limits
from cairn.storage.postgres import tenant_transaction

log = logging.getLogger(__name__)

GET_OVERRIDE = "SELECT limits FROM cairn.tenant_limits WHERE tenant_id = $1"
ALL_OVERRIDES = "SELECT tenant_id::text AS tenant_id, limits FROM cairn.all_tenant_limits()"
PUT_OVERRIDE = """
INSERT INTO cairn.tenant_limits (tenant_id, limits) VALUES ($1, $2::jsonb)
ON CONFLICT (tenant_id) DO UPDATE SET limits = EXCLUDED.limits, updated_at = now()
"""
# Live memory documents and the text stored: transcripts (session entries) and memory documents.
STORED_USAGE = """
SELECT
  (SELECT count(*) FROM consolidation.documents WHERE tenant_id = $1 AND NOT deleted) AS documents,
  (SELECT coalesce(sum(octet_length(text)), 0) FROM consolidation.documents WHERE tenant_id = $1 AND NOT deleted)
  + (SELECT coalesce(sum(octet_length(text)), 0) FROM session.entries WHERE tenant_id = $1) AS stored_bytes
"""


@dataclass(frozen=True)
class StoredUsage:
    memory_documents: int
    stored_bytes: int


class LimitStore:
    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]", settings: LimitSettings, bound_s: float) -> None:
        self._pool, self._settings, self._bound_s = pool, settings, bound_s
        self._overrides: dict[str, LimitOverride] = {}
        self._effective: dict[str, EffectiveLimits] = {}
        self._fresh_until: float | None = None  # None: never read
        self._loading: asyncio.Task[None] | None = None
        self._usage: dict[str, tuple[StoredUsage, float]] = {}
        self._reading: dict[str, asyncio.Task[None]] = {}

    async def override(self, tenant: str) -> LimitOverride | None:
        async with tenant_transaction(self._pool, tenant) as conn:
            stored = await conn.fetchval(GET_OVERRIDE, tenant)
        return None if stored is None else LimitOverride.model_validate_json(stored)

    async def put(self, tenant: str, override: LimitOverride) -> EffectiveLimits:
        async with tenant_transaction(self._pool, tenant) as conn:
            await conn.execute(PUT_OVERRIDE, tenant, override.model_dump_json(exclude_none=True))
        self._overrides[tenant] = override
        self._effective.pop(tenant, None)
        return effective_limits(self._settings, override)

    async def limits(self, tenant: str) -> EffectiveLimits:
        """The tenant's limits as last read: the first read is waited for (bounded), a stale one is used while a
        new read runs behind it. While Postgres does not answer, the last read (or the defaults) hold: counted as
        before is better than a request refused or held for them."""
        if self._fresh_until is None:
            await self._load()
        elif self._fresh_until <= time.monotonic() and self._loading is None:
            self._loading = asyncio.create_task(self._load())
        effective = self._effective.get(tenant)
        if effective is None:
            effective = self._effective[tenant] = effective_limits(self._settings, self._overrides.get(tenant))
        return effective

    async def _load(self) -> None:
        try:
            async with asyncio.timeout(self._bound_s), self._pool.acquire() as conn:
                rows = await conn.fetch(ALL_OVERRIDES)
            self._overrides = {row["tenant_id"]: LimitOverride.model_validate_json(row["limits"]) for row in rows}
            self._effective = {}
        except (OSError, asyncpg.PostgresError, TimeoutError) as error:
            log.warning("tenants' limits unreadable (%s): the previous or default limits hold", error)
        finally:
            self._fresh_until = time.monotonic() + self._settings.limits_cache_s
            self._loading = None

    async def stored(self, tenant: str) -> StoredUsage | None:
        """What the tenant has stored, as last read: the first read is waited for (bounded), a stale one is
        answered at once while a new read runs behind it. None while nothing could be read."""
        cached = self._usage.get(tenant)
        if cached is None:
            await self._read_usage(tenant)
            cached = self._usage.get(tenant)
            return cached[0] if cached else None
        if cached[1] <= time.monotonic() and tenant not in self._reading:
            self._reading[tenant] = asyncio.create_task(self._read_usage(tenant))
        return cached[0]

    async def read_stored(self, tenant: str) -> StoredUsage:
        async with tenant_transaction(self._pool, tenant) as conn:
            row = await conn.fetchrow(STORED_USAGE, tenant)
        assert row is not None
        return StoredUsage(memory_documents=int(row["documents"]), stored_bytes=int(row["stored_bytes"]))

    async def _read_usage(self, tenant: str) -> None:
        try:
            async with asyncio.timeout(self._bound_s):
                usage = await self.read_stored(tenant)
        except (OSError, asyncpg.PostgresError, TimeoutError) as error:
            log.warning("stored usage of tenant %s unreadable (%s): its quotas go unchecked", tenant, error)
            return
        finally:
            self._reading.pop(tenant, None)
        if len(self._usage) > 100_000:
            self._usage.clear()
        self._usage[tenant] = (usage, time.monotonic() + self._settings.usage_cache_s)
