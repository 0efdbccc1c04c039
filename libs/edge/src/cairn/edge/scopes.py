"""What each route of ingest and recall asks of a key: one table for both services, so that what a key's
scopes allow can be read (and reviewed) in one place. A route missing here is refused to every key (403):
`tests/unit/test_route_scopes.py` keeps the table and the services' OpenAPI documents in step.

Scopes (API.md): `write` = messages, batches, session commands; `read` = every query endpoint and recall;
`memory:write` = memory files, daily notes, records, erasures; `admin` = keys, limits, usage (of the key's own
tenant). `ADMIN_TOKEN` routes take the operator's admin token only; `PUBLIC` ones no credential."""

import re
from typing import Final, Literal, get_args

Scope = Literal["write", "read", "memory:write", "admin"]
SCOPES: Final[tuple[Scope, ...]] = get_args(Scope)
PUBLIC: Final = "public"
ADMIN_TOKEN: Final = "admin-token"
Access = Scope | Literal["public", "admin-token"]

ROUTE_SCOPES: Final[dict[tuple[str, str], Access]] = {
    # health, in every service
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/readyz"): PUBLIC,
    ("GET", "/metrics"): PUBLIC,
    # ingest: the command side
    ("POST", "/v1/messages"): "write",
    ("POST", "/v1/messages/batch"): "write",
    ("POST", "/v1/sessions"): "write",
    ("POST", "/v1/sessions/{session_key}/reset"): "write",
    ("POST", "/v1/sessions/{session_key}/fork"): "write",
    ("POST", "/v1/sessions/{session_key}/compaction"): "write",
    ("PUT", "/v1/agents/{agent_id}/config"): "admin",
    ("GET", "/v1/agents/{agent_id}/config"): "read",
    ("PUT", "/v1/memory/files/{path}"): "memory:write",
    ("DELETE", "/v1/memory/files/{path}"): "memory:write",
    ("POST", "/v1/memory/daily"): "memory:write",
    ("POST", "/v1/memory/records"): "memory:write",
    ("POST", "/v1/erasures"): "memory:write",
    # ingest: a tenant over its own keys
    ("POST", "/v1/keys"): "admin",
    ("GET", "/v1/keys"): "admin",
    ("DELETE", "/v1/keys/{key_id}"): "admin",
    ("POST", "/v1/keys/{key_id}/rotate"): "admin",
    # ingest: the operator
    ("POST", "/v1/admin/tenants"): ADMIN_TOKEN,
    ("DELETE", "/v1/admin/tenants/{tenant_id}"): ADMIN_TOKEN,
    ("GET", "/v1/admin/tenants/{tenant_id}/export"): ADMIN_TOKEN,
    ("POST", "/v1/admin/tenants/{tenant_id}/keys"): ADMIN_TOKEN,
    ("GET", "/v1/admin/tenants/{tenant_id}/keys"): ADMIN_TOKEN,
    ("DELETE", "/v1/admin/tenants/{tenant_id}/keys/{key_id}"): ADMIN_TOKEN,
    ("POST", "/v1/admin/tenants/{tenant_id}/keys/{key_id}/rotate"): ADMIN_TOKEN,
    ("PUT", "/v1/admin/tenants/{tenant_id}/llm"): ADMIN_TOKEN,
    ("GET", "/v1/admin/tenants/{tenant_id}/llm"): ADMIN_TOKEN,
    ("DELETE", "/v1/admin/tenants/{tenant_id}/llm"): ADMIN_TOKEN,
    ("GET", "/v1/admin/tenants/{tenant_id}/usage"): ADMIN_TOKEN,
    ("PUT", "/v1/admin/tenants/{tenant_id}/limits"): ADMIN_TOKEN,
    ("GET", "/v1/admin/tenants/{tenant_id}/limits"): ADMIN_TOKEN,
    ("GET", "/v1/admin/audit"): ADMIN_TOKEN,
    # recall: the query side
    ("POST", "/v1/sessions/search"): "read",
    ("GET", "/v1/sessions"): "read",
    ("GET", "/v1/sessions/{session_key}"): "read",
    ("GET", "/v1/sessions/{session_key}/history"): "read",
    ("POST", "/v1/memory/search"): "read",
    ("GET", "/v1/memory/files"): "read",
    ("GET", "/v1/memory/files/{path}"): "read",
    ("GET", "/v1/memory/versions/{path}"): "read",
    ("GET", "/v1/memory/status"): "read",
    ("GET", "/v1/memory/records"): "read",
    ("GET", "/v1/memory/records/{record_id}"): "read",
    ("GET", "/v1/erasures/{erasure_id}"): "read",
    ("POST", "/v1/recall"): "read",
    ("GET", "/v1/recall/traces"): "read",
    ("GET", "/v1/recall/traces/{trace_id}"): "read",
    ("GET", "/v1/usage"): "admin",
}

_CONVERTOR = re.compile(r"\{(\w+):\w+\}")


def documented_path(route_path: str) -> str:
    """A route's path as its OpenAPI document writes it (`{path:path}` → `{path}`), the table's keys."""
    return _CONVERTOR.sub(r"{\1}", route_path)


def access_of(method: str, route_path: str) -> Access | None:
    return ROUTE_SCOPES.get((method.upper(), documented_path(route_path)))
