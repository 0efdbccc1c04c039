"""`first_of` (issue 29, "Bounds") in a service served by uvicorn in this process as `serve` runs one (the same
middleware and protocol classes, both parsers), against the embedded stack: work that answers in time gives its
answer; at the deadline the work is cancelled (it sees the cancellation, and has stopped before the answer goes
out); a caller that hangs up mid-request cancels the work long before its deadline, with or without a body."""

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import httpx
import pytest
import uvicorn
from fastapi import APIRouter, Request
from pydantic import BaseModel, SecretStr

from cairn.delivery.settings import NatsSettings
from cairn.edge.settings import HttpSettings
from cairn.local import LocalStack
from cairn.local.processes import free_port
from cairn.platform.runtime import create_service_app, server_options
from cairn.platform.settings import RedisSettings, ServiceSettings
from cairn.recall.recall_bounds import first_of
from cairn.storage.settings import PostgresSettings

pytestmark = pytest.mark.integration
WAIT_S = 10.0  # bound of every wait on the server's side; far below the deadline of the hung-up requests
LONG_DEADLINE_S = 120.0


@dataclass
class Work:
    """One request's work, as the server's thread saw it."""

    started: threading.Event = field(default_factory=threading.Event)
    stopped: threading.Event = field(default_factory=threading.Event)
    answered: threading.Event = field(default_factory=threading.Event)
    cancelled: bool = False
    outcome: object = None


class Ask(BaseModel):
    id: str
    deadline_s: float
    work: Literal["answer", "hang", "fail"]
    padding: str = ""


@dataclass
class Routes:
    router: APIRouter = field(default_factory=APIRouter)
    works: dict[str, Work] = field(default_factory=dict)

    def work(self, work_id: str) -> Work:
        return self.works.setdefault(work_id, Work())

    async def _run(self, work: Work, kind: str) -> str:
        work.started.set()
        try:
            if kind == "fail":
                raise RuntimeError("the model answered nonsense")
            if kind == "hang":
                await asyncio.sleep(3600)
            return "the answer"
        except asyncio.CancelledError:
            work.cancelled = True
            raise
        finally:
            work.stopped.set()

    async def _bounded(self, request: Request, work_id: str, deadline_s: float, kind: str) -> dict[str, object]:
        work = self.work(work_id)
        work.outcome = await first_of(self._run(work, kind), deadline_s=deadline_s, request=request)
        work.answered.set()
        return {"outcome": work.outcome, "work_stopped": work.stopped.is_set()}

    def __post_init__(self) -> None:
        @self.router.post("/bounded")
        async def bounded_post(ask: Ask, request: Request) -> dict[str, object]:
            return await self._bounded(request, ask.id, ask.deadline_s, ask.work)

        @self.router.get("/bounded/{work_id}")
        async def bounded_get(
            work_id: str, deadline_s: float, work: Literal["answer", "hang", "fail"], request: Request
        ) -> dict[str, object]:
            return await self._bounded(request, work_id, deadline_s, work)


@dataclass
class Service:
    port: int
    routes: Routes

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture(scope="module", params=["httptools", "h11"])
def service(stack: LocalStack, request: pytest.FixtureRequest) -> Iterator[Service]:
    http = HttpSettings(port=free_port(), parser=request.param, loop="asyncio")
    settings = ServiceSettings(
        postgres=PostgresSettings(url=SecretStr(stack.postgres_url()), pool_min=1, pool_max=2),
        nats=NatsSettings(url=stack.nats_url),
        redis=RedisSettings(url=stack.redis_url),
        http=http,
    )
    routes = Routes()
    server = uvicorn.Server(uvicorn.Config(create_service_app("first-of-test", settings, [routes.router]),
                                           **server_options(settings)))  # fmt: skip
    thread = threading.Thread(target=server.run, name="first-of-test-server")
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "the in-process service did not start"
    try:
        yield Service(http.port, routes)
    finally:
        server.should_exit = True
        thread.join(15)


def test_work_that_answers_in_time_gives_its_answer(service: Service) -> None:
    work_id = str(uuid.uuid4())
    response = httpx.post(f"{service.url}/bounded", json={"id": work_id, "deadline_s": 30, "work": "answer"})
    assert response.status_code == 200, response.text
    assert response.json() == {"outcome": "the answer", "work_stopped": True}
    assert not service.routes.works[work_id].cancelled


def test_at_the_deadline_the_work_is_cancelled_and_has_stopped_before_the_answer(service: Service) -> None:
    work_id = str(uuid.uuid4())
    response = httpx.post(f"{service.url}/bounded", json={"id": work_id, "deadline_s": 0.3, "work": "hang"},
                          timeout=30)  # fmt: skip
    assert response.status_code == 200, response.text
    assert response.json() == {"outcome": "timeout", "work_stopped": True}
    assert service.routes.works[work_id].cancelled  # cancelled, not left to run out its hour


def test_an_error_of_the_work_is_the_requests_error(service: Service) -> None:
    work_id = str(uuid.uuid4())
    response = httpx.post(f"{service.url}/bounded", json={"id": work_id, "deadline_s": 30, "work": "fail"})
    assert response.status_code == 500
    assert response.headers["content-type"].startswith("application/problem+json")
    assert service.routes.works[work_id].stopped.is_set()


def _request(method: str, work_id: str, port: int) -> bytes:
    if method == "GET":
        return (f"GET /bounded/{work_id}?deadline_s={LONG_DEADLINE_S}&work=hang HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{port}\r\n\r\n").encode()  # fmt: skip
    body = (f'{{"id": "{work_id}", "deadline_s": {LONG_DEADLINE_S}, "work": "hang", '
            f'"padding": "{"x" * 3000}"}}').encode()  # fmt: skip
    head = (f"POST /bounded HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()  # fmt: skip
    return head + body


@pytest.mark.parametrize("method", ["POST", "GET"])
def test_a_caller_that_hangs_up_cancels_the_work(service: Service, method: str) -> None:
    work_id = str(uuid.uuid4())
    work = service.routes.work(work_id)
    with socket.create_connection(("127.0.0.1", service.port), timeout=WAIT_S) as sock:
        sock.sendall(_request(method, work_id, service.port))
        assert work.started.wait(WAIT_S), "the work did not start"
        assert not work.stopped.is_set()
    # the connection is closed: the work is cancelled now, not at its deadline two minutes away
    assert work.stopped.wait(WAIT_S), "the work kept running after the caller hung up"
    assert work.cancelled
    assert work.answered.wait(WAIT_S)
    assert work.outcome == "disconnected"
