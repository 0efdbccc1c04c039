"""Which sessions a caller may see: the agent's `sessions_visibility` is the ceiling and a request's own
`visibility` may only narrow it (no `visibility`: the ceiling itself). A request without a caller session
asks as the agent's main session (so `tree` reaches every session of the agent, `self` the main session only).
A key limited to some agents never reaches `all` (every agent's sessions): it is narrowed to `agent`.

The ceiling is read from ingest's `agent_configs` and kept `fresh_s` per process (lowering it applies within
that time, as any config change does for recall)."""

from dataclasses import dataclass
from typing import Literal, get_args

import asyncpg

from cairn.edge.auth import KeyGrant
from cairn.events import AgentConfig
from cairn.recall.queries import ReadStore, Scope
from cairn.recall.recall_reads import AGENT_CONFIG, CONFIG_FRESH_S, KnownConfigs
from cairn.storage.postgres import tenant_transaction

Visibility = Literal["self", "tree", "agent", "all"]
WIDENING: tuple[Visibility, ...] = get_args(Visibility)  # narrowest first


def effective(ceiling: Visibility, asked: Visibility | None, key: KeyGrant | None) -> Visibility:
    chosen = ceiling if asked is None else min(ceiling, asked, key=WIDENING.index)
    if chosen == "all" and key is not None and key.agents is not None:
        return "agent"
    return chosen


def main_session(agent: str) -> str:
    return f"agent:{agent}:main"


@dataclass(frozen=True)
class Seen:
    """What a caller sees: `scope` for the stores, and the caller's session it was computed from."""

    scope: Scope
    caller: str

    def admits(self, agent: str, session_key: str) -> bool:
        """Whether the session `session_key` of `agent` is within sight."""
        if self.scope.agent_id is not None and self.scope.agent_id != agent:
            return False
        return self.scope.session_keys is None or session_key in self.scope.session_keys


async def seen(store: ReadStore, tenant: str, agent: str, caller: str | None, visibility: Visibility) -> Seen:
    asking = caller or main_session(agent)
    if visibility == "all":
        return Seen(Scope(None, None), asking)
    if visibility == "agent" or (visibility == "tree" and asking == main_session(agent)):
        return Seen(Scope(agent, None), asking)
    if visibility == "self":
        return Seen(Scope(agent, [asking]), asking)
    return Seen(Scope(agent, await store.tree_keys(tenant, agent, asking)), asking)


class Ceilings:
    """Each agent's `sessions_visibility`, read at most every `fresh_s` per process."""

    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]", fresh_s: float = CONFIG_FRESH_S) -> None:
        self._pool = pool
        self._known = KnownConfigs(fresh_s)

    async def of(self, tenant: str, agent: str) -> Visibility:
        config = self._known.fresh(tenant, agent)
        if config is None:
            async with tenant_transaction(self._pool, tenant) as conn:
                stored = await conn.fetchval(AGENT_CONFIG, tenant, agent)
            config = AgentConfig() if stored is None else AgentConfig.model_validate_json(stored)
            self._known.keep(tenant, agent, config)
        return config.sessions_visibility
