"""A dependency that is down is a 503 problem+json with Retry-After, answered within the bound
(CAIRN_HTTP_DEPENDENCY_TIMEOUT_S, 2 s by default), never a bare 500 or a hang; the connection it came on keeps
working, and once the dependency is back the same request succeeds and the message is stored once.

Postgres and NATS are stopped and started again, so this module runs its own stack (its own ports and folder):
stopping the shared one would fail every other test running meanwhile."""

import http.client
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cairn.local import LocalStack
from tests.conftest import Tenant

pytestmark = pytest.mark.e2e

BOUND_S = 2.0  # the default CAIRN_HTTP_DEPENDENCY_TIMEOUT_S
SLACK_S = 2.0  # a busy two-core machine's scheduling, on top of the bound
SERVICES = ("ingest", "session", "indexer", "recall")


@pytest.fixture(scope="module")
def own_stack() -> Iterator[LocalStack]:
    home = Path(tempfile.mkdtemp(prefix="cairn-outages-", dir=os.environ.get("CAIRN_TEST_TMP", "/tmp")))
    home.chmod(0o755)
    env = {"OTEL_TRACES_EXPORTER": "none", "CAIRN_NATS_ACK_WAIT_S": "5"}
    local = LocalStack(home, durable=False, extra_env=env)
    local._assign_ports()
    try:
        local.start_servers()
        local.migrate()
        for service in SERVICES:
            local.start_service(service)
        for service in SERVICES:
            local.wait_ready(service)
        yield local
    finally:
        local.down()
        kept = Path(os.environ.get("CAIRN_OUTAGES_LOGS", "/tmp/cairn-outages-logs"))  # the shared stack's are swept
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(home / "logs", kept, dirs_exist_ok=True)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(local.postgres.base, ignore_errors=True)


class Connection:
    """One keep-alive HTTP/1.1 connection to a service, to show that an answer did not close it."""

    def __init__(self, url: str, key: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.http = http.client.HTTPConnection(host, int(port), timeout=30)
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self.http.connect()
        self.socket = self.http.sock

    def call(self, method: str, path: str, body: object = None) -> tuple[int, dict[str, str], dict[str, object], float]:
        started = time.monotonic()
        self.http.request(method, path, json.dumps(body) if body is not None else None, self.headers)
        response = self.http.getresponse()
        data = response.read()
        elapsed = time.monotonic() - started
        headers = {name.lower(): value for name, value in response.getheaders()}
        return response.status, headers, json.loads(data) if data else {}, elapsed

    def still_the_same(self) -> bool:
        """True while http.client has not had to open a new connection."""
        return self.http.sock is self.socket and self.http.sock is not None

    def close(self) -> None:
        self.http.close()


def assert_unavailable(status: int, headers: dict[str, str], problem: dict[str, object], elapsed: float) -> None:
    assert status == 503, problem
    assert headers["content-type"] == "application/problem+json"
    assert int(headers["retry-after"]) >= 1
    assert problem["status"] == 503
    assert elapsed < BOUND_S + SLACK_S, f"answered after {elapsed:.1f}s"
    print(f"503 ({problem['detail']}) in {elapsed:.2f}s")  # shown by `pytest -rP`


def answered_after_outage(conn: Connection, body: dict[str, object]) -> tuple[int, dict[str, object]]:
    """The client's part: retry a 503 (bounded) until the write gets another answer."""
    deadline = time.monotonic() + 60
    while True:
        status, _, answer, _ = conn.call("POST", "/v1/messages", body)
        if status != 503 or time.monotonic() > deadline:
            return status, answer
        time.sleep(0.2)


def retried_until_accepted(conn: Connection, body: dict[str, object]) -> dict[str, object]:
    status, answer = answered_after_outage(conn, body)
    assert status == 202, answer
    return answer


def found_once(tenant: Tenant, token: str, position: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        response = tenant.recall.post("/v1/sessions/search", json={"query": token, "consistent_with": position})
        if (response.status_code == 200 and not response.json()["indexing"]) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert response.status_code == 200, response.text
    texts = [r["snippet"] for r in response.json()["results"]]
    assert len([t for t in texts if token in t]) == 1, texts


def message(token: str) -> dict[str, object]:
    return {"text": f"outage test {token}", "message_id": f"m-{token}", "channel": "telegram", "peer_id": "7"}


def test_postgres_down_is_503_within_the_bound_on_a_connection_that_keeps_working(own_stack: LocalStack) -> None:
    tenant = Tenant(own_stack)  # its key not yet used: the next write must ask Postgres who it is
    token = f"pg{uuid.uuid4().hex[:8]}"
    ingest = Connection(own_stack.url("ingest"), tenant.ingest.headers["Authorization"].split()[1])
    recall = Connection(own_stack.url("recall"), tenant.ingest.headers["Authorization"].split()[1])
    try:
        assert ingest.call("GET", "/healthz")[0] == 200
        assert recall.call("GET", "/healthz")[0] == 200
        own_stack.stop_postgres()
        try:
            assert_unavailable(*ingest.call("POST", "/v1/messages", message(token)))
            assert_unavailable(*recall.call("POST", "/v1/sessions/search", {"query": token}))
            assert ingest.call("GET", "/healthz")[0] == 200
            assert recall.call("GET", "/healthz")[0] == 200
            assert ingest.still_the_same()
            assert recall.still_the_same()
            ready = httpx.get(f"{own_stack.url('ingest')}/readyz", timeout=10)
            assert ready.status_code == 503
            assert ready.json()["postgres"].startswith("failing")
        finally:
            own_stack.start_servers()
        accepted = retried_until_accepted(ingest, message(token))
        assert ingest.still_the_same()
        found_once(tenant, token, str(accepted["position"]))
    finally:
        ingest.close()
        recall.close()
        tenant.close()


def test_nats_down_is_503_within_the_bound_and_the_retry_stores_the_message_once(own_stack: LocalStack) -> None:
    tenant = Tenant(own_stack)
    token = f"nats{uuid.uuid4().hex[:8]}"
    ingest = Connection(own_stack.url("ingest"), tenant.ingest.headers["Authorization"].split()[1])
    recall = Connection(own_stack.url("recall"), tenant.ingest.headers["Authorization"].split()[1])
    try:
        warm = ingest.call("POST", "/v1/messages", message(f"warm{token}"))  # the key and config are cached
        assert warm[0] == 202, warm
        counted = recall.call("GET", "/v1/memory/status")
        assert (counted[0], counted[2]["dead_letters"]) == (200, {}), counted
        own_stack.stop_nats()
        try:
            status, headers, problem, elapsed = ingest.call("POST", "/v1/messages", message(token))
            assert_unavailable(status, headers, problem, elapsed)
            assert "same message_id" in str(problem["detail"])  # it may still land: retrying is what is safe
            assert ingest.call("GET", "/healthz")[0] == 200
            assert ingest.still_the_same()
            # the memory status still answers, from Postgres, and says the dead letters are unknown for now
            status, _, answer, elapsed = recall.call("GET", "/v1/memory/status")
            assert (status, answer["dead_letters"]) == (200, None), answer
            print(f"memory status without NATS in {elapsed:.2f}s")  # shown by `pytest -rP`
            fallbacks = answer["fallbacks"]
            assert isinstance(fallbacks, list)
            assert any("dead letters unknown" in str(f) for f in fallbacks), answer
        finally:
            own_stack.start_servers()
        accepted = retried_until_accepted(ingest, message(token))
        assert ingest.still_the_same()
        found_once(tenant, token, str(accepted["position"]))
        for service in SERVICES:
            own_stack.wait_ready(service)
    finally:
        ingest.close()
        recall.close()
        tenant.close()


def test_redis_down_is_503_within_the_bound_for_a_request_that_needs_it(own_stack: LocalStack) -> None:
    tenant = Tenant(own_stack)
    created = tenant.ingest.post("/v1/sessions", json={"incognito": True})
    assert created.status_code == 201, created.text
    whisper = {"text": "kept in memory only", "session_key": created.json()["session_key"]}
    ingest = Connection(own_stack.url("ingest"), tenant.ingest.headers["Authorization"].split()[1])
    try:
        own_stack.stop_redis()
        try:
            assert_unavailable(*ingest.call("POST", "/v1/messages", whisper))
            assert ingest.call("GET", "/healthz")[0] == 200
            assert ingest.still_the_same()
        finally:
            own_stack.start_servers()
        status, answer = answered_after_outage(ingest, whisper)
        assert status == 404, answer  # the thread lived in Redis only: gone with it, as documented
        assert answer["status"] == 404
    finally:
        ingest.close()
        tenant.close()
