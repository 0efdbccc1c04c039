"""What ingest owns: tenants with their first API key, and each agent's configuration.

Tenant creation goes through a SECURITY DEFINER function: the tenant does not exist yet, so row-level
security has nothing to admit it by. Agent configs are read for routing on every message, so a replica
keeps each one for a few seconds; a PUT on this replica forgets it at once, other replicas follow within
that time.
"""

import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import asyncpg

from cairn.events import AgentConfig
from cairn.events.routing import RoutingConfig, routing_config
from cairn.ingest.domain import NewKey
from cairn.platform.postgres import tenant_transaction

CREATE_TENANT = "SELECT ingest.create_tenant($1, $2, $3, $4)"
GET_CONFIG = "SELECT config, version FROM ingest.agent_configs WHERE tenant_id = $1 AND agent_id = $2"
LOCK_CONFIG = GET_CONFIG + " FOR UPDATE"
SAVE_CONFIG = """
INSERT INTO ingest.agent_configs (tenant_id, agent_id, config, version) VALUES ($1, $2, $3::jsonb, 1)
ON CONFLICT (tenant_id, agent_id) DO UPDATE
SET config = excluded.config, version = ingest.agent_configs.version + 1, updated_at = now()
RETURNING version
"""
CACHE_LIMIT = 10_000  # (tenant, agent) pairs; the cache starts over rather than grow without bound


class TenantStore:
    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]") -> None:
        self._pool = pool

    async def create_tenant(self, name: str, key: NewKey) -> str:
        tenant_id = uuid.uuid4()
        async with self._pool.acquire() as conn:
            await conn.fetchval(CREATE_TENANT, tenant_id, name, key.digest, key.prefix)
        return str(tenant_id)


@dataclass(frozen=True)
class StoredConfig:
    config: AgentConfig
    version: int  # 0: never configured, the defaults apply


class VersionConflict(Exception):
    def __init__(self, current: int) -> None:
        super().__init__(f"the config is at version {current}")
        self.current = current


class AgentConfigs:
    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]", cache_seconds: float) -> None:
        self._pool, self._cache_seconds = pool, cache_seconds
        self._routing: dict[tuple[str, str], tuple[RoutingConfig, float]] = {}

    async def get(self, tenant: str, agent: str) -> StoredConfig:
        async with tenant_transaction(self._pool, tenant) as conn:
            row = await conn.fetchrow(GET_CONFIG, tenant, agent)
        return _stored(row)

    async def put(
        self,
        tenant: str,
        agent: str,
        config: AgentConfig,
        if_match: int | None,
        announce: Callable[[int], Awaitable[None]],
    ) -> int:
        """Replace the config and return its new version; `announce(version)` runs before the commit, so a
        config that could not be announced is not stored either."""
        async with tenant_transaction(self._pool, tenant) as conn:
            current = _stored(await conn.fetchrow(LOCK_CONFIG, tenant, agent)).version
            if if_match is not None and if_match != current:
                raise VersionConflict(current)
            version: int = await conn.fetchval(SAVE_CONFIG, tenant, agent, config.model_dump_json())
            await announce(version)
        self._routing.pop((tenant, agent), None)
        return version

    async def routing(self, tenant: str, agent: str) -> RoutingConfig:
        cached = self._routing.get((tenant, agent))
        if cached and cached[1] > time.monotonic():
            return cached[0]
        routing = routing_config((await self.get(tenant, agent)).config)
        if len(self._routing) >= CACHE_LIMIT:
            self._routing.clear()
        self._routing[(tenant, agent)] = (routing, time.monotonic() + self._cache_seconds)
        return routing


def _stored(row: "asyncpg.Record | None") -> StoredConfig:
    if row is None:
        return StoredConfig(AgentConfig(), 0)
    return StoredConfig(AgentConfig.model_validate_json(row["config"]), row["version"])
