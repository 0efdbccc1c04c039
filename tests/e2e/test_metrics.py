"""Issues 28 and 34 on the running stack: every service answers `GET /metrics` in the Prometheus text format with its
HTTP figures (by route template, never the raw path), its consumers' figures (applied, retried, dead-lettered, lag,
pending in JetStream, dead letters held) and the process collectors'; a poison event shows up as a dead letter of the
consumer that parked it, in its counter and in the dead letters it holds. `/metrics` is not in the OpenAPI
documents. (With `CAIRN_METRICS_TOKEN` set it needs the token: tests/integration/test_metrics_endpoint.py.)"""

import asyncio
import json
import time
import uuid
from collections.abc import Callable

import httpx
import nats
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cairn.events import INGEST_STREAM, InboundMessage, MessageReceived, subject_for
from cairn.events.streams import INGEST_PARTITIONS
from cairn.local import LocalStack
from tests.conftest import Tenant

pytestmark = pytest.mark.e2e

Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]  # family sample name → sorted labels → value
SERVICES = ("ingest", "session", "indexer", "recall", "consolidation")
EVERY_SERVICE = {
    "cairn_http_requests", "cairn_http_request_duration_seconds", "cairn_http_unavailable_responses",
    "cairn_jetstream_figures_up", "process_cpu_seconds", "process_resident_memory_bytes", "python_gc_collections",
    "python_info",
}  # fmt: skip
CONSUMER_FAMILIES = {
    "cairn_consumer_events_applied", "cairn_consumer_events_retried", "cairn_consumer_events_dead_lettered",
    "cairn_consumer_lag_seconds", "cairn_consumer_pending_messages", "cairn_consumer_ack_pending_messages",
    "cairn_consumer_redelivered_messages", "cairn_dead_letters_held",
}  # fmt: skip
# what each service consumes, as (consumer, stream)
CONSUMERS = {
    "ingest": {("ingest", "CAIRN_INBOX")},
    "session": {(f"session-p{p}", INGEST_STREAM) for p in range(INGEST_PARTITIONS)},
    "indexer": {
        ("indexer-transcripts", "CAIRN_SESSION"),
        ("memory-index", "CAIRN_MEMORY"),
        ("memory-index", INGEST_STREAM),
    },
    "recall": set(),
    "consolidation": {
        ("consolidation", "CAIRN_SESSION"),
        ("consolidation", INGEST_STREAM),
        ("consolidation-extraction", "CAIRN_SESSION"),  # transcript turns for extraction, Redis only
    },
}


def scrape(stack: LocalStack, service: str) -> tuple[set[str], Samples]:
    response = httpx.get(f"{stack.url(service)}/metrics", timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    families, samples = set(), Samples()
    for family in text_string_to_metric_families(response.text):
        families.add(family.name)
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return families, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get(name, {}).get(tuple(sorted(labels.items())), 0.0)


def consumers_in(samples: Samples, name: str) -> set[tuple[str, str]]:
    return {(labels["consumer"], labels["stream"]) for labels in map(dict, samples.get(name, {}))}


def wait_for(look: Callable[[], bool], seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while not look():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.mark.parametrize("service", SERVICES)
def test_every_service_serves_its_metrics_with_its_consumers(services: LocalStack, service: str) -> None:
    families, samples = scrape(services, service)
    assert families >= EVERY_SERVICE, EVERY_SERVICE - families
    assert families >= CONSUMER_FAMILIES, CONSUMER_FAMILIES - families
    assert value(samples, "cairn_jetstream_figures_up") == 1.0
    assert consumers_in(samples, "cairn_consumer_events_applied_total") == CONSUMERS[service]
    # JetStream's figures come once each consumer has created itself (a partition's once its lease is taken)
    assert wait_for(lambda: consumers_in(scrape(services, service)[1], "cairn_consumer_pending_messages")
                    == CONSUMERS[service])  # fmt: skip
    held = {dict(labels)["consumer"] for labels in samples.get("cairn_dead_letters_held", {})}
    assert held == {consumer for consumer, _ in CONSUMERS[service]}
    assert not any("tenant" in dict(labels) for series in samples.values() for labels in series)


@pytest.mark.parametrize("service", ["ingest", "recall"])
def test_metrics_are_not_in_the_openapi_document(services: LocalStack, service: str) -> None:
    document = httpx.get(f"{services.url(service)}/openapi.json", timeout=10).json()
    assert "/metrics" not in document["paths"]
    assert "/v1/memory/status" in document["paths"] or "/v1/messages" in document["paths"]


def test_a_request_is_counted_under_its_route_template_never_its_path(services: LocalStack, tenant: Tenant) -> None:
    route = {"method": "GET", "route": "/v1/sessions/{session_key}/history", "status": "404"}
    before = value(scrape(services, "recall")[1], "cairn_http_requests_total", **route)
    key = f"agent:main:telegram:direct:{uuid.uuid4().hex}"
    assert tenant.recall.get(f"/v1/sessions/{key}/history").status_code == 404
    _, samples = scrape(services, "recall")
    assert value(samples, "cairn_http_requests_total", **route) == before + 1
    routes = {dict(labels)["route"] for labels in samples["cairn_http_requests_total"]}
    assert not any(key in r for r in routes), routes
    latency = {"method": "GET", "route": "/v1/sessions/{session_key}/history"}
    assert value(samples, "cairn_http_request_duration_seconds_count", **latency) >= 1


async def _publish_past_the_door(stack: LocalStack, event: MessageReceived) -> None:
    """An event ingest would have refused (a NUL in its text), published straight to NATS: the session service
    cannot decode it and dead-letters it."""
    bad = event.model_dump(mode="json")
    bad["message"]["text"] = f"bad\x00 {uuid.uuid4().hex}"
    nc = await nats.connect(stack.nats_url)
    try:
        await nc.jetstream().publish(subject_for(event), json.dumps(bad).encode(), stream=INGEST_STREAM)
    finally:
        await nc.close()


def _per_session_consumer(samples: Samples, name: str) -> dict[str, float]:
    return {dict(labels)["consumer"]: v for labels, v in samples.get(name, {}).items()}


def test_a_poison_event_is_counted_and_held_as_its_consumers_dead_letter(services: LocalStack, tenant: Tenant) -> None:
    _, before = scrape(services, "session")
    dead_before = _per_session_consumer(before, "cairn_consumer_events_dead_lettered_total")
    held_before = _per_session_consumer(before, "cairn_dead_letters_held")
    event = MessageReceived(
        tenant_id=tenant.tenant_id, session_key="agent:main:main", message=InboundMessage(text="fine")
    )
    asyncio.run(_publish_past_the_door(services, event))

    def risen() -> dict[str, float]:
        dead = _per_session_consumer(scrape(services, "session")[1], "cairn_consumer_events_dead_lettered_total")
        return {consumer: n - dead_before[consumer] for consumer, n in dead.items() if n != dead_before[consumer]}

    assert wait_for(lambda: bool(risen())), "no session consumer counted a dead letter"
    (consumer, added), *others = risen().items()
    assert (added, others) == (1, [])

    def held() -> float:
        return _per_session_consumer(scrape(services, "session")[1], "cairn_dead_letters_held")[consumer]

    assert wait_for(lambda: held() == held_before[consumer] + 1), (consumer, held(), held_before[consumer])
