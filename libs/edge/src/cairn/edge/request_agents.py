"""The agents a request names, for a key limited to some agents: `agent_id` in its path, query or JSON body
(each message of a batch), and `main` on a route that takes an agent without naming one (API.md: `agent_id`
defaults to main). Read only for such keys: the body is parsed once more."""

import json
from typing import Any

from fastapi import Request
from fastapi.routing import APIRoute

DEFAULT_AGENT = "main"


async def requested_agents(request: Request) -> set[str]:
    named = {request.path_params.get("agent_id"), request.query_params.get("agent_id")}
    body = await _json_body(request)
    if isinstance(body, dict):
        named.add(body.get("agent_id"))
        messages = body.get("messages")
        if isinstance(messages, list):
            named.update(m.get("agent_id") or DEFAULT_AGENT for m in messages if isinstance(m, dict))
    agents = {a for a in named if isinstance(a, str)}
    if not agents and _takes_agent(request.scope.get("route")):
        agents.add(DEFAULT_AGENT)
    return agents


async def _json_body(request: Request) -> Any:
    if request.method in ("GET", "DELETE", "HEAD"):
        return None
    try:
        return json.loads(await request.body() or b"null")
    except ValueError:
        return None  # not JSON: the route's own validation answers


def _takes_agent(route: object) -> bool:
    """Whether the route has an `agent_id` parameter or body field (then it defaults to main)."""
    if not isinstance(route, APIRoute):
        return False
    dependant = route.dependant
    params = [*dependant.path_params, *dependant.query_params]
    if any(p.name == "agent_id" for p in params):
        return True
    for field in dependant.body_params:
        fields = getattr(field.field_info.annotation, "model_fields", {})
        if "agent_id" in fields:
            return True
    return False
