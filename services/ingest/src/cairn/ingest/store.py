"""What ingest owns: tenants with their first API key, and each agent's configuration.

Tenant creation goes through a SECURITY DEFINER function: the tenant does not exist yet, so row-level
security has nothing to admit it by. Agent configs are read for routing on every message, so a replica
keeps each one: a PUT on this replica forgets it at once, and every replica listening for changes
(`CONFIG_CHANNEL`, notified by the PUT's transaction, delivered at its commit) forgets it when the PUT commits.
Each entry is kept `listen_cache_seconds` while the replica listens (a safety bound), otherwise (not connected
yet, or the listening connection lost) `cache_seconds`: other replicas follow within that time, as before.
The replica that PUTs keeps the config it stored (an adapter's next message would otherwise read it back), unless
some other change was notified meanwhile; its listener then knows its own notification by the sending backend's
pid and does not forget the entry for it, while any other replica's notification still does.
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
from cairn.ingest import audit
from cairn.ingest.audit import Actor
from cairn.ingest.domain import NewKey
from cairn.storage.postgres import tenant_transaction

log = logging.getLogger(__name__)

# Notified by every stored agent config change, payload "<tenant_id> <agent_id>"; ingest replicas listen.
CONFIG_CHANNEL = "cairn_agent_config"

CREATE_TENANT = "SELECT ingest.create_tenant($1, $2, $3, $4)"
TENANT_EXISTS = "SELECT EXISTS (SELECT 1 FROM ingest.tenants WHERE tenant_id = $1)"
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

    async def create_tenant(self, name: str, key: NewKey, actor: Actor) -> str:
        tenant_id = uuid.uuid4()
        async with tenant_transaction(self._pool, str(tenant_id)) as conn:
            await conn.fetchval(CREATE_TENANT, tenant_id, name, key.digest, key.prefix)
            await audit.record(conn, actor, str(tenant_id), "tenant.create", f"tenant:{tenant_id}")
        return str(tenant_id)

    async def exists(self, tenant: str) -> bool:
        async with tenant_transaction(self._pool, tenant) as conn:
            found: bool = await conn.fetchval(TENANT_EXISTS, tenant)
        return found


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
        # The notification of this replica's own PUT still to come, by (tenant, agent): the backend pid sending it.
        self._own_notices: dict[tuple[str, str], int] = {}

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
        key, stored = (tenant, agent), config.model_dump_json()
        try:
            async with tenant_transaction(self._pool, tenant) as conn:
                current = _stored(await conn.fetchrow(LOCK_CONFIG, tenant, agent)).version
                if if_match is not None and if_match != current:
                    raise VersionConflict(current)
                version: int = await conn.fetchval(SAVE_AND_NOTIFY, tenant, agent, stored)
                await announce(version)
                if self._listening:
                    self._own_notices[key] = conn.get_server_pid()
                changes = self._changes
        except BaseException:
            self._own_notices.pop(key, None)
            raise
        unchanged = self._changes == changes  # nothing notified since the save: what we stored is the newest
        self._forget(tenant, agent)
        if unchanged:
            self._keep(key, routing_config(AgentConfig.model_validate_json(stored)), self._ttl(trusted=True))
        return version

    async def routing(self, tenant: str, agent: str) -> RoutingConfig:
        cached = self._routing.get((tenant, agent))
        if cached and cached[1] > time.monotonic():
            return cached[0]
        changes = self._changes
        routing = routing_config((await self.get(tenant, agent)).config)
        self._keep((tenant, agent), routing, self._ttl(trusted=self._changes == changes))
        return routing

    def _ttl(self, trusted: bool) -> float:
        """A read (or save) across a change, or made while not listening, is kept only briefly."""
        return self._listen_cache_seconds if trusted and self._listening else self._cache_seconds

    def _keep(self, key: tuple[str, str], routing: RoutingConfig, ttl: float) -> None:
        if len(self._routing) >= CACHE_LIMIT:
            self._routing.clear()
        self._routing[key] = (routing, time.monotonic() + ttl)

    def _forget(self, tenant: str, agent: str) -> None:
        self._changes += 1
        self._routing.pop((tenant, agent), None)

    def _notified(self, _conn: object, pid: int, _channel: str, payload: object) -> None:
        tenant, _, agent = str(payload).partition(" ")
        if self._own_notices.get((tenant, agent)) == pid:
            del self._own_notices[(tenant, agent)]  # this replica's own PUT: it kept what it stored
            return
        self._forget(tenant, agent)

    def _forget_all(self, listening: bool) -> None:
        self._changes += 1
        self._listening = listening
        self._routing.clear()
        self._own_notices.clear()

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
