"""What ingest owns: tenants with their first API key, and each agent's configuration.

Tenant creation goes through a SECURITY DEFINER function: the tenant does not exist yet, so row-level
security has nothing to admit it by. Agent configs are read for routing on every message, so a replica
keeps each one: a PUT on this replica forgets it at once, and every replica listening for changes
(`CONFIG_CHANNEL`, notified by the PUT's transaction, delivered at its commit) forgets it when the PUT commits.
Each entry is kept `listen_cache_seconds` while the replica listens (a safety bound), otherwise (not connected
yet, or the listening connection lost) `cache_seconds`: other replicas follow within that time, as before.
"""

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import asyncpg

from cairn.events import AgentConfig
from cairn.events.routing import RoutingConfig, routing_config
from cairn.ingest.domain import NewKey
from cairn.platform.postgres import tenant_transaction

log = logging.getLogger(__name__)

# Notified by every stored agent config change, payload "<tenant_id> <agent_id>"; ingest replicas listen.
CONFIG_CHANNEL = "cairn_agent_config"

CREATE_TENANT = "SELECT ingest.create_tenant($1, $2, $3, $4)"
GET_CONFIG = "SELECT config, version FROM ingest.agent_configs WHERE tenant_id = $1 AND agent_id = $2"
LOCK_CONFIG = GET_CONFIG + " FOR UPDATE"
SAVE_CONFIG = """
INSERT INTO ingest.agent_configs (tenant_id, agent_id, config, version) VALUES ($1, $2, $3::jsonb, 1)
ON CONFLICT (tenant_id, agent_id) DO UPDATE
SET config = excluded.config, version = ingest.agent_configs.version + 1, updated_at = now()
RETURNING version
"""
# The notification goes out only if the transaction commits, and in the same round trip as the save.
SAVE_AND_NOTIFY = f"""
WITH saved AS ({SAVE_CONFIG})
SELECT version, pg_notify('{CONFIG_CHANNEL}', $1::text || ' ' || $2) FROM saved
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
    """Also a background listener for config changes, run as one of the service's consumers (`run`: one
    connection per process). Without it running, entries are kept `cache_seconds`."""

    consumer = "agent-config-listener"
    stream = "-"

    def __init__(
        self,
        pool: "asyncpg.Pool[asyncpg.Record]",
        cache_seconds: float,
        listen_url: str | None = None,
        listen_cache_seconds: float = 300.0,
    ) -> None:
        self._pool, self._cache_seconds = pool, cache_seconds
        self._listen_url, self._listen_cache_seconds = listen_url, listen_cache_seconds
        self._routing: dict[tuple[str, str], tuple[RoutingConfig, float]] = {}
        self._listening = False
        # Counts what may have made a config read before it stale: a read across a change is kept briefly only.
        self._changes = 0

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
            version: int = await conn.fetchval(SAVE_AND_NOTIFY, tenant, agent, config.model_dump_json())
            await announce(version)
        self._forget(tenant, agent)
        return version

    async def routing(self, tenant: str, agent: str) -> RoutingConfig:
        cached = self._routing.get((tenant, agent))
        if cached and cached[1] > time.monotonic():
            return cached[0]
        changes = self._changes
        routing = routing_config((await self.get(tenant, agent)).config)
        if len(self._routing) >= CACHE_LIMIT:
            self._routing.clear()
        trusted = self._listening and self._changes == changes
        ttl = self._listen_cache_seconds if trusted else self._cache_seconds
        self._routing[(tenant, agent)] = (routing, time.monotonic() + ttl)
        return routing

    def _forget(self, tenant: str, agent: str) -> None:
        self._changes += 1
        self._routing.pop((tenant, agent), None)

    def _notified(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        tenant, _, agent = str(payload).partition(" ")
        self._forget(tenant, agent)

    def _forget_all(self, listening: bool) -> None:
        self._changes += 1
        self._listening = listening
        self._routing.clear()

    async def run(self) -> None:
        if self._listen_url is None:
            return
        while True:
            try:
                await self._listen(self._listen_url)
            except (OSError, asyncpg.PostgresError) as error:
                log.warning("cannot listen for agent config changes (configs are kept briefly meanwhile): %s", error)
                await asyncio.sleep(1.0)

    async def _listen(self, url: str) -> None:
        """Until the connection is lost. What was cached before the LISTEN may have missed a change: forgotten."""
        conn = await asyncpg.connect(url)
        lost = asyncio.Event()
        try:
            conn.add_termination_listener(lambda _: lost.set())
            await conn.add_listener(CONFIG_CHANNEL, self._notified)
            self._forget_all(listening=True)
            await lost.wait()
            log.warning("lost the agent config listener, reconnecting")
        finally:
            self._forget_all(listening=False)
            conn.terminate()


def _stored(row: "asyncpg.Record | None") -> StoredConfig:
    if row is None:
        return StoredConfig(AgentConfig(), 0)
    return StoredConfig(AgentConfig.model_validate_json(row["config"]), row["version"])
