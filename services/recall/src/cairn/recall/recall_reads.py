"""What one recall reads before searching, in one tenant transaction: the agent's config (ingest's
`agent_configs`, the table every PUT of the config writes), the session's facts and the same person's other
direct sessions (`recall_scope`).

The agent's config is also kept in process (`KnownConfigs`): read again at most every `CONFIG_FRESH_S`, and, however
old, the agent's last known `timeout_ms` bounds the read of the next one (the route's deadline starts before it)."""

import time
from collections import OrderedDict
from dataclasses import dataclass

import asyncpg

from cairn.events import AgentConfig
from cairn.recall.recall_scope import SessionFacts, same_person_sessions, session_facts
from cairn.storage.postgres import tenant_transaction

AGENT_CONFIG = "SELECT config FROM ingest.agent_configs WHERE tenant_id = $1 AND agent_id = $2"
# How long a config read is used without reading it again: a PUT of the config reaches recall within this. A few
# seconds spare the statement on nearly every recall of a busy agent, and are shorter than a human notices.
CONFIG_FRESH_S = 5.0
CONFIGS_KEPT = 10_000  # agents whose config one process remembers, least recently used forgotten first
DEFAULT_TIMEOUT_MS = AgentConfig().active_memory.timeout_ms
# What a Postgres that is away or overwhelmed raises through asyncpg and its pool: a recall answers without it.
DATABASE_FAILURES = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)


@dataclass(frozen=True)
class Setting:
    config: AgentConfig
    facts: SessionFacts | None  # None: the session is not stored (yet)


class KnownConfigs:
    """The agents' configs as last read, per tenant + agent, with when they were read."""

    def __init__(self, fresh_s: float = CONFIG_FRESH_S, kept: int = CONFIGS_KEPT) -> None:
        self._fresh_s, self._kept = fresh_s, kept
        self._known: OrderedDict[tuple[str, str], tuple[AgentConfig, float]] = OrderedDict()

    def last(self, tenant: str, agent: str) -> AgentConfig | None:
        """The config last read, however long ago; None if never (or forgotten)."""
        known = self._known.get((tenant, agent))
        return None if known is None else known[0]

    def fresh(self, tenant: str, agent: str) -> AgentConfig | None:
        """The config last read if that was less than `fresh_s` ago."""
        known = self._known.get((tenant, agent))
        if known is None or time.monotonic() - known[1] >= self._fresh_s:
            return None
        return known[0]

    def keep(self, tenant: str, agent: str, config: AgentConfig) -> None:
        self._known[(tenant, agent)] = (config, time.monotonic())
        self._known.move_to_end((tenant, agent))
        while len(self._known) > self._kept:
            self._known.popitem(last=False)


class RecallReads:
    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]", known: KnownConfigs | None = None) -> None:
        self._pool = pool
        self.known = known or KnownConfigs()

    def deadline_ms(self, tenant: str, agent: str) -> int:
        """The deadline of a recall whose config is not read yet: the agent's last known one, else the default."""
        last = self.known.last(tenant, agent)
        return DEFAULT_TIMEOUT_MS if last is None else last.active_memory.timeout_ms

    async def setting(self, tenant: str, agent: str, session_key: str) -> Setting:
        config = self.known.fresh(tenant, agent)
        async with tenant_transaction(self._pool, tenant) as conn:
            stored = await conn.fetchval(AGENT_CONFIG, tenant, agent) if config is None else None
            facts = await session_facts(conn, tenant, agent, session_key)
        if config is None:
            config = AgentConfig() if stored is None else AgentConfig.model_validate_json(stored)
            self.known.keep(tenant, agent, config)
        return Setting(config, facts)

    async def same_person(self, tenant: str, agent: str, session_key: str, config: AgentConfig) -> list[str]:
        async with tenant_transaction(self._pool, tenant) as conn:
            return await same_person_sessions(conn, tenant, agent, session_key, config)
