"""The HTTP contract: each service's /openapi.json describes the API.md paths it serves, and health
endpoints answer."""

import httpx
import pytest

from cairn.local import LocalStack

INGEST_PATHS = {
    ("post", "/v1/messages"),
    ("post", "/v1/messages/batch"),
    ("post", "/v1/sessions/{session_key}/reset"),
    ("post", "/v1/sessions"),
    ("post", "/v1/sessions/{session_key}/fork"),
    ("put", "/v1/agents/{agent_id}/config"),
    ("get", "/v1/agents/{agent_id}/config"),
    ("post", "/v1/admin/tenants"),
    ("put", "/v1/memory/files/{path}"),
    ("delete", "/v1/memory/files/{path}"),
    ("post", "/v1/memory/daily"),
    ("put", "/v1/admin/tenants/{tenant_id}/llm"),
    ("get", "/v1/admin/tenants/{tenant_id}/llm"),
    ("delete", "/v1/admin/tenants/{tenant_id}/llm"),
    ("get", "/v1/admin/tenants/{tenant_id}/usage"),
    ("post", "/v1/admin/tenants/{tenant_id}/keys"),
    ("get", "/v1/admin/tenants/{tenant_id}/keys"),
    ("delete", "/v1/admin/tenants/{tenant_id}/keys/{key_id}"),
    ("post", "/v1/admin/tenants/{tenant_id}/keys/{key_id}/rotate"),
    ("post", "/v1/keys"),
    ("get", "/v1/keys"),
    ("delete", "/v1/keys/{key_id}"),
    ("post", "/v1/keys/{key_id}/rotate"),
    ("get", "/v1/admin/audit"),
}
RECALL_PATHS = {
    ("post", "/v1/sessions/search"),
    ("get", "/v1/memory/files/{path}"),
    ("get", "/v1/memory/files"),
    ("get", "/v1/memory/versions/{path}"),
    ("post", "/v1/recall"),
    ("get", "/v1/usage"),
}


def _operations(stack: LocalStack, service: str) -> set[tuple[str, str]]:
    spec = httpx.get(f"{stack.url(service)}/openapi.json", timeout=10).json()
    return {(method, path) for path, item in spec["paths"].items() for method in item}


@pytest.mark.e2e
def test_openapi_documents_the_contract(services: LocalStack) -> None:
    assert _operations(services, "ingest") >= INGEST_PATHS
    assert _operations(services, "recall") >= RECALL_PATHS


@pytest.mark.e2e
@pytest.mark.parametrize("service", ["ingest", "session", "indexer", "recall", "consolidation"])
def test_every_service_is_live_and_ready(services: LocalStack, service: str) -> None:
    assert httpx.get(f"{services.url(service)}/healthz", timeout=10).json() == {"status": "ok"}
    ready = httpx.get(f"{services.url(service)}/readyz", timeout=10).json()
    assert ready == {"status": "ready", "postgres": "ok", "nats": "ok", "consumers": "ok", "redis": "ok"}
