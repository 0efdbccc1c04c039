"""`/metrics` of a running service with `CAIRN_METRICS_TOKEN` set and NATS stopped: without the token a scrape is a
401 problem; with it the scrape is answered while NATS is away, bounded by `CAIRN_METRICS_NATS_WAIT_S`, with the
in-memory figures and without JetStream's (`cairn_jetstream_figures_up` 0), and JetStream's come back with NATS.

NATS is stopped and started again, so this module runs its own stack (its own ports and folder) with the session
service alone: stopping the shared one would fail every other test running meanwhile."""

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cairn.events.streams import INGEST_PARTITIONS
from cairn.local import LocalStack

pytestmark = pytest.mark.e2e

TOKEN = "e2e-metrics-token"
SCRAPE = {"Authorization": f"Bearer {TOKEN}"}
JETSTREAM_SERIES = ("cairn_consumer_pending_messages", "cairn_consumer_ack_pending_messages", "cairn_dead_letters_held")


@pytest.fixture(scope="module")
def own_stack() -> Iterator[LocalStack]:
    home = Path(tempfile.mkdtemp(prefix="cairn-metrics-", dir=os.environ.get("CAIRN_TEST_TMP", "/tmp")))
    home.chmod(0o755)
    env = {
        "OTEL_TRACES_EXPORTER": "none",
        "CAIRN_METRICS_TOKEN": TOKEN,
        "CAIRN_METRICS_NATS_WAIT_S": "0.5",
        "CAIRN_METRICS_CACHE_S": "0.5",
    }
    local = LocalStack(home, durable=False, extra_env=env)
    local._assign_ports()
    try:
        local.start_servers()
        local.migrate()
        local.start_service("session")
        local.wait_ready("session")
        yield local
    finally:
        local.down()
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(local.postgres.base, ignore_errors=True)


def scrape(stack: LocalStack) -> dict[str, list[dict[str, str]]]:
    """Each sample name with the label sets it came with; the value of `cairn_jetstream_figures_up` as its label."""
    response = httpx.get(f"{stack.url('session')}/metrics", headers=SCRAPE, timeout=10)
    assert response.status_code == 200, response.text
    found: dict[str, list[dict[str, str]]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            labels = {**sample.labels, "value": str(sample.value)}
            found.setdefault(sample.name, []).append(labels)
    return found


def up(found: dict[str, list[dict[str, str]]]) -> str:
    (sample,) = found["cairn_jetstream_figures_up"]
    return sample["value"]


def wait_for_up(stack: LocalStack, wanted: str) -> dict[str, list[dict[str, str]]]:
    deadline = time.monotonic() + 60
    while True:
        started = time.monotonic()
        found = scrape(stack)
        if up(found) == wanted:
            print(f"scrape with cairn_jetstream_figures_up {wanted} in {time.monotonic() - started:.2f}s")  # pytest -rP
            return found
        assert time.monotonic() < deadline, f"cairn_jetstream_figures_up stayed {up(found)}"
        time.sleep(0.2)


def test_a_scrape_without_the_token_is_refused(own_stack: LocalStack) -> None:
    refused = httpx.get(f"{own_stack.url('session')}/metrics", timeout=10)
    assert refused.status_code == 401
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["status"] == 401
    assert "cairn_" not in refused.text


def test_with_nats_away_a_scrape_is_answered_without_jetstreams_figures(own_stack: LocalStack) -> None:
    before = wait_for_up(own_stack, "1.0")  # every partition's consumer created
    assert all(name in before for name in JETSTREAM_SERIES)
    own_stack.stop_nats()
    try:
        away = wait_for_up(own_stack, "0.0")
        assert not any(name in away for name in JETSTREAM_SERIES), "no last values passed off as current"
        applied = {s["consumer"] for s in away["cairn_consumer_events_applied_total"]}
        assert applied == {f"session-p{p}" for p in range(INGEST_PARTITIONS)}, (
            "the in-memory figures are reported as always"
        )
        assert away["cairn_consumer_lag_seconds"]
    finally:
        own_stack.start_servers()
    back = wait_for_up(own_stack, "1.0")
    assert all(name in back for name in JETSTREAM_SERIES)
    own_stack.wait_ready("session")
