"""A service's worker that raises, through the real composition root (its lifespan connects to the stack's
Postgres, NATS and Redis): it is restarted, `/readyz` names it and its error while it fails, `/healthz` fails
once it has crashed `give_up_after` times in a row, and both are fine again once it runs."""

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import SecretStr

from cairn.delivery.pull import Consumer
from cairn.delivery.settings import NatsSettings, SupervisionSettings
from cairn.local import LocalStack
from cairn.platform import runtime
from cairn.platform.runtime import Runtime, create_service_app
from cairn.platform.settings import RedisSettings, ServiceSettings
from cairn.storage.settings import PostgresSettings
from tests.integration.conftest import eventually

pytestmark = pytest.mark.integration


class BrokenWorker:
    """Raises at once on every run while `broken`; otherwise runs until cancelled."""

    consumer, stream = "broken-worker", "-"

    def __init__(self) -> None:
        self.broken, self.runs = True, 0

    async def run(self) -> None:
        self.runs += 1
        if self.broken:
            raise RuntimeError(f"cannot handle row {self.runs}")
        await asyncio.Event().wait()


@pytest.fixture
async def client(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[httpx.AsyncClient, BrokenWorker]]:
    # the test process keeps its own logging and heap: only the service's wiring is under test
    monkeypatch.setattr(runtime, "setup_logging", lambda name, settings: None)
    monkeypatch.setattr(runtime, "settle_heap", lambda: None)
    settings = ServiceSettings(
        postgres=PostgresSettings(url=SecretStr(stack.postgres_url()), pool_min=1, pool_max=2),
        nats=NatsSettings(url=stack.nats_url),
        redis=RedisSettings(url=stack.redis_url),
        supervision=SupervisionSettings(restart_first_s=0.05, restart_cap_s=0.2, settle_s=1.0, give_up_after=3),
    )
    worker = BrokenWorker()

    def wire(_: Runtime) -> list[Consumer]:
        return [worker]

    app = create_service_app("supervision-test", settings, wire=wire)
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        yield http, worker


async def test_a_failing_worker_is_restarted_and_reported_until_it_runs(
    client: tuple[httpx.AsyncClient, BrokenWorker],
) -> None:
    http, worker = client

    async def not_ready() -> httpx.Response | None:
        response = await http.get("/readyz")
        return response if response.status_code == 503 and "broken-worker" in response.text else None

    reported = await eventually(not_ready)
    assert reported is not None
    body = reported.json()
    assert "restarting after a crash" in body["consumers"]
    assert "RuntimeError: cannot handle row" in body["consumers"]
    assert (body["postgres"], body["nats"], body["redis"]) == ("ok", "ok", "ok"), "only the worker is failing"

    async def not_live() -> httpx.Response | None:
        response = await http.get("/healthz")
        return response if response.status_code == 503 else None

    dead = await eventually(not_live)
    assert dead is not None, "crashed 3 times in a row: the process is to be restarted"
    assert "crashed" in dead.json()["broken-worker@-"]
    assert worker.runs >= 3, "restarted after each crash"

    worker.broken = False  # what broke it is fixed (or gone): the next restart runs

    async def recovered() -> bool:
        ready, live = await http.get("/readyz"), await http.get("/healthz")
        return ready.status_code == 200 and live.status_code == 200

    assert await eventually(recovered, within=15.0)
    assert (await http.get("/readyz")).json()["consumers"] == "ok"
