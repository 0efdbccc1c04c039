"""What one recall reads before searching, in one tenant transaction: the agent's config (ingest's
`agent_configs`, the table every PUT of the config writes), the session's facts and the same person's other
direct sessions (`recall_scope`)."""

from dataclasses import dataclass

import asyncpg

from cairn.events import AgentConfig
from cairn.recall.recall_scope import SessionFacts, same_person_sessions, session_facts
from cairn.storage.postgres import tenant_transaction

AGENT_CONFIG = "SELECT config FROM ingest.agent_configs WHERE tenant_id = $1 AND agent_id = $2"


@dataclass(frozen=True)
class Setting:
    config: AgentConfig
    facts: SessionFacts | None  # None: the session is not stored (yet)


class RecallReads:
    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]") -> None:
        self._pool = pool

    async def setting(self, tenant: str, agent: str, session_key: str) -> Setting:
        async with tenant_transaction(self._pool, tenant) as conn:
            stored = await conn.fetchval(AGENT_CONFIG, tenant, agent)
            facts = await session_facts(conn, tenant, agent, session_key)
        config = AgentConfig() if stored is None else AgentConfig.model_validate_json(stored)
        return Setting(config, facts)

    async def same_person(self, tenant: str, agent: str, session_key: str, config: AgentConfig) -> list[str]:
        async with tenant_transaction(self._pool, tenant) as conn:
            return await same_person_sessions(conn, tenant, agent, session_key, config)
