"""Fixtures shared by the three tiers. Integration and end-to-end tests run against a real embedded
stack (NATS JetStream, PostgreSQL + pgvector, Redis) started once per test session in its own folder
with its own ports, so a running `make up` is never disturbed."""

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cairn.local import LocalStack
from tests.collector import SpanCollector


@pytest.fixture(scope="session")
def span_collector() -> Iterator[SpanCollector]:
    with SpanCollector() as collector:
        yield collector


@pytest.fixture(scope="session")
def stack(span_collector: SpanCollector) -> Iterator[LocalStack]:
    """The servers, migrated; services are started by the `services` fixture when a test needs them."""
    home = Path(tempfile.mkdtemp(prefix="cairn-test-", dir=os.environ.get("CAIRN_TEST_TMP", "/tmp")))
    home.chmod(0o755)
    env = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{span_collector.url}/v1/traces",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "CAIRN_NATS_ACK_WAIT_S": "5",
        "CAIRN_NATS_MAX_DELIVER": "3",
        # A small context window so the compaction threshold (window − 24000, at least window/10) is reachable.
        "CAIRN_SESSION_CONTEXT_WINDOW": "2000",
        # Remembered transcripts are chunked after a short quiet time, so tests need not wait 5 s.
        "CAIRN_MEMORY_DEBOUNCE_S": "0.3",
        "CAIRN_MEMORY_POLL_S": "0.2",
        # Turns of a session within 2 s form one extraction batch, so tests need not wait the default 30 s.
        "CAIRN_EXTRACTION_DEBOUNCE_S": "2",
        "CAIRN_EXTRACTION_POLL_S": "0.2",
        # Records of processed events are swept every second, so a test sees aged ones go.
        "CAIRN_PROCESSED_SWEEP_S": "1",
        # Recall reads an agent's config anew on every call, so a test that changes it sees the change at once.
        "CAIRN_AGENT_CONFIG_FRESH_S": "0",
        # Hosts a tenant's model override may point at: the tests' model servers (tests/model_api.py) run on
        # 127.0.0.1; the others are only ever checked, never called.
        "CAIRN_LLM_ALLOWED_HOSTS": "127.0.0.1,llm.allowed.example,[fd00::7]",
        # Due memory flushes are looked for often and a failed one is retried soon, so flush tests wait little.
        "CAIRN_FLUSH_POLL_S": "0.2",
        "CAIRN_FLUSH_RETRY_FIRST_S": "0.5",
        "CAIRN_FLUSH_NO_MODEL_RECHECK_S": "1",
        # What a tenant has stored is counted anew a second after it was last, so quota tests need not wait 30 s.
        "CAIRN_LIMITS_USAGE_CACHE_S": "1",
    }
    local = LocalStack(home, durable=False, extra_env=env)
    local._assign_ports()
    try:
        local.start_servers()
        local.migrate()
        yield local
    finally:
        local.down()
        kept = Path(os.environ.get("CAIRN_TEST_LOGS", "/tmp/cairn-test-logs"))
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(home / "logs", kept, dirs_exist_ok=True)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(local.postgres.base, ignore_errors=True)


@pytest.fixture(scope="session")
def services(stack: LocalStack) -> LocalStack:
    for service in ("ingest", "session", "indexer", "recall", "consolidation"):
        stack.start_service(service)
    for service in ("ingest", "session", "indexer", "recall", "consolidation"):
        stack.wait_ready(service)
    return stack


class Tenant:
    """A fresh tenant with its own key: every end-to-end test is isolated by tenant."""

    def __init__(self, stack: LocalStack) -> None:
        admin = {"Authorization": f"Bearer {stack.state.admin_token}"}
        created = httpx.post(
            f"{stack.url('ingest')}/v1/admin/tenants",
            json={"name": f"t-{uuid.uuid4().hex[:8]}"},
            headers=admin,
            timeout=10,
        )
        created.raise_for_status()
        self.tenant_id: str = created.json()["tenant_id"]
        self.api_key: str = created.json()["api_key"]
        headers = {"Authorization": f"Bearer {self.api_key}"}
        self.ingest = httpx.Client(base_url=stack.url("ingest"), headers=headers, timeout=30)
        self.recall = httpx.Client(base_url=stack.url("recall"), headers=headers, timeout=30)

    def close(self) -> None:
        self.ingest.close()
        self.recall.close()

    def say(self, text: str, **fields: object) -> dict[str, str]:
        response = self.ingest.post("/v1/messages", json={"text": text, **fields})
        assert response.status_code == 202, response.text
        body: dict[str, str] = response.json()
        return body

    def search(self, query: str, consistent_with: str | None = None, **fields: object) -> dict[str, object]:
        response = self.recall.post(
            "/v1/sessions/search", json={"query": query, "consistent_with": consistent_with, **fields}
        )
        assert response.status_code == 200, response.text
        body: dict[str, object] = response.json()
        return body


@pytest.fixture
def tenant(services: LocalStack) -> Iterator[Tenant]:
    created = Tenant(services)
    yield created
    created.close()


@pytest.fixture
def other_tenant(services: LocalStack) -> Iterator[Tenant]:
    created = Tenant(services)
    yield created
    created.close()
