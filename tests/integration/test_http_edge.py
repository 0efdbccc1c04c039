"""The HTTP edge every service shares, served by uvicorn in this process exactly as `serve` runs a service (same
middleware, same protocol classes), against the embedded stack, with small limits: an unexpected error is a
problem+json 500 with a trace id on a connection that stays usable; a body over the limit is refused with 413
before it is read (declared) or as it streams (chunked); a request head that stalls is cut off; requests over
the concurrency limit get 503 problem+json with Retry-After. Both parsers (httptools, h11) are exercised."""

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
import uvicorn
from fastapi import APIRouter, Request
from pydantic import SecretStr

from cairn.delivery.settings import NatsSettings
from cairn.edge.settings import HttpSettings
from cairn.local import LocalStack
from cairn.local.processes import free_port
from cairn.platform.runtime import create_service_app, server_options
from cairn.platform.settings import RedisSettings, ServiceSettings
from cairn.storage.settings import PostgresSettings

pytestmark = pytest.mark.integration

MAX_BODY = 4096
HEADER_TIMEOUT_S = 1.0
BODY_TIMEOUT_S = 1.0
MAX_CONCURRENCY = 2
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


@dataclass
class Routes:
    """Test routes and what they saw, shared with the server's thread."""

    router: APIRouter = field(default_factory=APIRouter)
    bodies_read: int = 0
    holding: int = 0
    release: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        @self.router.get("/boom")
        async def boom() -> None:
            raise RuntimeError("a bug")

        @self.router.post("/size")
        async def size(request: Request) -> dict[str, int]:
            body = await request.body()
            self.bodies_read += 1
            return {"bytes": len(body)}

        @self.router.get("/hold")
        async def hold() -> dict[str, bool]:
            self.holding += 1
            try:
                for _ in range(1000):  # at most ~10 s
                    if self.release.is_set():
                        return {"released": True}
                    await asyncio.sleep(0.01)
                return {"released": False}
            finally:
                self.holding -= 1


@dataclass
class Edge:
    port: int
    routes: Routes

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)


@pytest.fixture(scope="module", params=["httptools", "h11"])
def edge(stack: LocalStack, request: pytest.FixtureRequest) -> Iterator[Edge]:
    http = HttpSettings(
        port=free_port(),
        parser=request.param,
        loop="asyncio",
        max_body_bytes=MAX_BODY,
        header_timeout_s=HEADER_TIMEOUT_S,
        body_timeout_s=BODY_TIMEOUT_S,
        max_concurrency=MAX_CONCURRENCY,
    )
    settings = ServiceSettings(
        postgres=PostgresSettings(url=SecretStr(stack.postgres_url()), pool_min=1, pool_max=2),
        nats=NatsSettings(url=stack.nats_url),
        redis=RedisSettings(url=stack.redis_url),
        http=http,
    )
    routes = Routes()
    server = uvicorn.Server(uvicorn.Config(create_service_app("edge-test", settings, [routes.router]),
                                           **server_options(settings)))  # fmt: skip
    thread = threading.Thread(target=server.run, name="edge-test-server")
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "the in-process service did not start"
    try:
        yield Edge(http.port, routes)
    finally:
        server.should_exit = True
        thread.join(15)


def read_response(sock: socket.socket) -> tuple[str, dict[str, str], bytes]:
    """One response with a Content-Length body: status line, headers (lower-case names), body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed before a whole response head: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    length = int(headers["content-length"])
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "the connection closed in the middle of a body"
        body += chunk
    return status, headers, body[:length]


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes the connection (within the socket's timeout) without answering."""
    try:
        return sock.recv(4096) == b""
    except ConnectionResetError:
        return True


def get(path: str, extra: str = "") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: edge\r\n{extra}\r\n".encode()


def test_an_unexpected_error_is_a_problem_with_the_callers_trace_id_and_the_connection_stays_usable(
    edge: Edge,
) -> None:
    with edge.connect() as sock:
        sock.sendall(get("/boom", f"traceparent: 00-{TRACE_ID}-00f067aa0ba902b7-01\r\n"))
        status, headers, body = read_response(sock)
        assert status == "HTTP/1.1 500 Internal Server Error"
        assert headers["content-type"] == "application/problem+json"
        assert "connection" not in headers  # uvicorn's own 500 says `connection: close`
        problem = json.loads(body)
        assert problem["status"] == 500
        assert problem["trace_id"] == TRACE_ID
        assert TRACE_ID in problem["detail"]
        sock.sendall(get("/healthz"))
        assert read_response(sock)[0] == "HTTP/1.1 200 OK"


def test_without_a_trace_the_500_carries_a_generated_trace_id_that_is_logged(
    edge: Edge, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="cairn.edge.errors"):
        response = httpx.get(f"{edge.url}/boom", timeout=10)
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    reference = response.json()["trace_id"]
    assert len(reference) == 32
    assert int(reference, 16) > 0
    logged = [r for r in caplog.records if reference in r.getMessage()]
    assert logged
    assert logged[0].exc_info is not None


def test_a_declared_body_over_the_limit_is_refused_before_it_is_read(edge: Edge) -> None:
    with edge.connect() as sock:
        # 200 MB announced, one byte sent: the answer must come without the server waiting for the rest
        sock.sendall(
            b"POST /size HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\nContent-Length: 209715200\r\n\r\n{"
        )
        status, headers, body = read_response(sock)
        assert status == "HTTP/1.1 413 Request Entity Too Large"
        assert headers["content-type"] == "application/problem+json"
        assert headers["connection"] == "close"
        assert json.loads(body)["status"] == 413
        assert closed_by_server(sock)
    assert edge.routes.bodies_read == 0


def test_a_chunked_body_is_cut_off_once_it_passes_the_limit(edge: Edge) -> None:
    before = edge.routes.bodies_read
    chunk = b"x" * 2048
    with edge.connect() as sock:
        sock.sendall(b"POST /size HTTP/1.1\r\nHost: edge\r\nTransfer-Encoding: chunked\r\n\r\n")
        sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk) * 3)  # 6 KiB, over 4 KiB; no last chunk
        status, headers, body = read_response(sock)
        assert status == "HTTP/1.1 413 Request Entity Too Large"
        assert headers["content-type"] == "application/problem+json"
        assert json.loads(body)["status"] == 413
    assert edge.routes.bodies_read == before
    within = httpx.post(f"{edge.url}/size", content=iter([chunk, chunk[:1000]]), timeout=10)
    assert within.status_code == 200
    assert within.json() == {"bytes": 3048}


def test_a_body_that_stalls_is_answered_408_and_a_slow_one_within_the_bound_is_read(edge: Edge) -> None:
    """The headers come at once, the body never finishes: the header-read timer has ended, the body's bound
    answers (declared length and chunked alike), and the route never sees a body. A body sent in pieces that
    arrives whole within the bound is read as usual."""
    before = edge.routes.bodies_read
    heads = (b"Content-Length: 100\r\n\r\n{", b"Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n")
    for head in heads:
        with edge.connect() as sock:
            sock.sendall(b"POST /size HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\n" + head)
            status, headers, body = read_response(sock)
            assert status.startswith("HTTP/1.1 408"), status
            assert headers["content-type"] == "application/problem+json"
            assert headers["connection"] == "close"
            assert json.loads(body)["status"] == 408
            assert closed_by_server(sock)
    assert edge.routes.bodies_read == before

    def pieces() -> Iterator[bytes]:
        for _ in range(3):
            time.sleep(BODY_TIMEOUT_S / 5)
            yield b"x" * 100

    within = httpx.post(f"{edge.url}/size", content=pieces(), timeout=10)
    assert within.status_code == 200
    assert within.json() == {"bytes": 300}


def test_a_request_head_that_stalls_is_cut_off_and_an_idle_keep_alive_is_not(edge: Edge) -> None:
    with edge.connect() as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: edge\r\n")  # never finished
        assert closed_by_server(sock)
    with edge.connect() as silent:  # connected, nothing sent
        assert closed_by_server(silent)
    with edge.connect() as sock:
        sock.sendall(get("/healthz"))
        assert read_response(sock)[0] == "HTTP/1.1 200 OK"
        time.sleep(HEADER_TIMEOUT_S * 1.5)  # idle between requests: the keep-alive timeout (75 s) applies
        sock.sendall(get("/healthz"))
        assert read_response(sock)[0] == "HTTP/1.1 200 OK"


def test_requests_over_the_concurrency_limit_are_refused_with_a_problem_and_retry_after(edge: Edge) -> None:
    routes = edge.routes
    routes.release.clear()
    answers: list[httpx.Response] = []
    holders = [threading.Thread(target=lambda: answers.append(httpx.get(f"{edge.url}/hold", timeout=20)))
               for _ in range(MAX_CONCURRENCY)]  # fmt: skip
    for holder in holders:
        holder.start()
    try:
        deadline = time.monotonic() + 10
        while routes.holding < MAX_CONCURRENCY and time.monotonic() < deadline:
            time.sleep(0.01)
        assert routes.holding == MAX_CONCURRENCY
        refused = httpx.get(f"{edge.url}/hold", timeout=10)
        assert refused.status_code == 503
        assert refused.headers["content-type"] == "application/problem+json"
        assert int(refused.headers["retry-after"]) >= 1
        assert httpx.get(f"{edge.url}/readyz", timeout=10).status_code == 200  # probes are never refused
    finally:
        routes.release.set()
        for holder in holders:
            holder.join(20)
    assert [a.json() for a in answers] == [{"released": True}] * MAX_CONCURRENCY
    assert httpx.get(f"{edge.url}/hold", timeout=10).status_code == 200
