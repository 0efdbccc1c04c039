"""`GET /metrics` of a service app served by uvicorn in this process (as `serve` runs one), against the embedded stack,
with `CAIRN_METRICS_TOKEN` set and a concurrency limit of one: a scrape without the token is a 401 problem, with it the
figures; a refusal is counted by its reason (overload, a dependency down) under the template of the route it would
have reached; a scrape is answered even while the process is at its limit."""

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import asyncpg
import httpx
import pytest
import uvicorn
from fastapi import APIRouter
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from cairn.delivery.settings import NatsSettings
from cairn.edge.settings import HttpSettings
from cairn.local import LocalStack
from cairn.local.processes import free_port
from cairn.platform.runtime import create_service_app, server_options
from cairn.platform.settings import MetricsSettings, RedisSettings, ServiceSettings
from cairn.storage.settings import PostgresSettings

pytestmark = pytest.mark.integration

TOKEN = "scrape-token-for-tests"
SCRAPE = {"Authorization": f"Bearer {TOKEN}"}


@dataclass
class Routes:
    router: APIRouter = field(default_factory=APIRouter)
    holding: int = 0
    release: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        @self.router.get("/hold/{name}")
        async def hold(name: str) -> dict[str, str]:
            self.holding += 1
            try:
                for _ in range(1000):  # at most ~10 s
                    if self.release.is_set():
                        break
                    await asyncio.sleep(0.01)
                return {"name": name}
            finally:
                self.holding -= 1

        @self.router.get("/postgres-restarting")
        async def postgres_restarting() -> None:
            raise asyncpg.exceptions.CannotConnectNowError("the database system is starting up")


@pytest.fixture(scope="module")
def served(stack: LocalStack) -> Iterator[tuple[str, Routes]]:
    settings = ServiceSettings(
        postgres=PostgresSettings(url=SecretStr(stack.postgres_url()), pool_min=1, pool_max=2),
        nats=NatsSettings(url=stack.nats_url),
        redis=RedisSettings(url=stack.redis_url),
        http=HttpSettings(port=free_port(), loop="asyncio", max_concurrency=1),
        metrics=MetricsSettings(token=SecretStr(TOKEN)),
    )
    routes = Routes()
    app = create_service_app("metrics-test", settings, [routes.router])
    server = uvicorn.Server(uvicorn.Config(app, **server_options(settings)))
    thread = threading.Thread(target=server.run, name="metrics-test-server")
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "the in-process service did not start"
    try:
        yield f"http://127.0.0.1:{settings.http.port}", routes
    finally:
        server.should_exit = True
        thread.join(15)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_a_scrape_needs_the_token_when_one_is_set(served: tuple[str, Routes]) -> None:
    url, _ = served
    for headers in ({}, {"Authorization": "Bearer not-the-token"}, {"Authorization": f"Basic {TOKEN}"}):
        refused = httpx.get(f"{url}/metrics", headers=headers, timeout=10)
        assert refused.status_code == 401, headers
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert "CAIRN_METRICS_TOKEN" in refused.json()["detail"]
        assert "cairn_" not in refused.text
    answered = httpx.get(f"{url}/metrics", headers=SCRAPE, timeout=10)
    assert answered.status_code == 200
    figures = samples(answered.text)
    assert figures[("cairn_jetstream_figures_up", ())] == 1.0
    assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200, "the probes need no token"
    assert "/metrics" not in httpx.get(f"{url}/openapi.json", timeout=10).json()["paths"]


def test_refusals_are_counted_by_reason_under_the_route_they_would_have_reached(served: tuple[str, Routes]) -> None:
    url, routes = served
    routes.release.clear()
    held: list[httpx.Response] = []
    holder = threading.Thread(target=lambda: held.append(httpx.get(f"{url}/hold/first", timeout=20)))
    holder.start()
    try:
        deadline = time.monotonic() + 10
        while routes.holding < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert routes.holding == 1
        refused = httpx.get(f"{url}/hold/second", timeout=10)
        assert refused.status_code == 503
        during = httpx.get(f"{url}/metrics", headers=SCRAPE, timeout=10)
        assert during.status_code == 200, "a scrape is never refused for being busy"
    finally:
        routes.release.set()
        holder.join(20)
    assert [answer.status_code for answer in held] == [200]
    assert httpx.get(f"{url}/postgres-restarting", timeout=10).status_code == 503

    figures = samples(httpx.get(f"{url}/metrics", headers=SCRAPE, timeout=10).text)
    refusals = "cairn_http_unavailable_responses_total"
    assert figures[(refusals, (("dependency", "none"), ("reason", "overload")))] == 1.0
    assert figures[(refusals, (("dependency", "postgres"), ("reason", "dependency_down")))] == 1.0
    requests = "cairn_http_requests_total"
    hold = (("method", "GET"), ("route", "/hold/{name}"))
    assert figures[(requests, (*hold, ("status", "503")))] == 1.0
    assert figures[(requests, (*hold, ("status", "200")))] == 1.0
    restarting = (("method", "GET"), ("route", "/postgres-restarting"), ("status", "503"))
    assert figures[(requests, restarting)] == 1.0
    assert not any("second" in dict(labels).get("route", "") for _, labels in figures)
