"""Agent configuration (API.md `PUT|GET /v1/agents/{agent_id}/config`): how an agent's direct messages are
routed to sessions, when its sessions reset, its context window, what its session tools may see.

Ingest owns it and routes by it. A PUT replaces the whole config (omitted fields take their defaults)
and is announced as `agent.configured`, carrying the effective config, from which the session service
keeps what it needs. The version travels as the ETag; `If-Match` makes a PUT conditional (409 if stale).
"""

from typing import Annotated

from fastapi import APIRouter, Header, Path, Request, Response

from cairn.edge.auth import Tenant
from cairn.edge.problems import Problem
from cairn.events import AgentConfig, AgentConfigured
from cairn.events.envelope import TOKEN_PATTERN
from cairn.ingest.memory import version_of
from cairn.ingest.store import AgentConfigs, VersionConflict
from cairn.platform.runtime import runtime_of

router = APIRouter(tags=["agents"])
AgentId = Annotated[str, Path(pattern=TOKEN_PATTERN)]


def _configs(request: Request) -> AgentConfigs:
    configs: AgentConfigs = runtime_of(request).extras["agent_configs"]
    return configs


def _version_of(if_match: str | None) -> int | None:
    try:
        return version_of(if_match)
    except ValueError as error:
        errors = [{"field": "If-Match", "message": str(error)}]
        raise Problem(422, f"The request is invalid: {error}.", errors) from error


@router.get("/v1/agents/{agent_id}/config", response_model=AgentConfig)
async def get_config(agent_id: AgentId, tenant: Tenant, request: Request, response: Response) -> AgentConfig:
    """The agent's effective config: the defaults when it was never configured (ETag "0")."""
    stored = await _configs(request).get(tenant, agent_id)
    response.headers["ETag"] = f'"{stored.version}"'
    return stored.config


@router.put(
    "/v1/agents/{agent_id}/config",
    response_model=AgentConfig,
    responses={409: {"description": "If-Match names a version that is not the current one"}},
)
async def put_config(
    agent_id: AgentId,
    config: AgentConfig,
    tenant: Tenant,
    request: Request,
    response: Response,
    if_match: Annotated[str | None, Header()] = None,
) -> AgentConfig:
    """Replace the agent's config; answers with the effective config once the change is announced."""
    publisher = runtime_of(request).publisher

    async def announce(version: int) -> None:
        await publisher.publish(AgentConfigured(tenant_id=tenant, agent_id=agent_id, version=version, config=config))

    try:
        version = await _configs(request).put(tenant, agent_id, config, _version_of(if_match), announce)
    except VersionConflict as conflict:
        raise Problem(
            409, f"The config changed meanwhile (now version {conflict.current}): GET it and apply your change again."
        ) from conflict
    response.headers["ETag"] = f'"{version}"'
    return config
