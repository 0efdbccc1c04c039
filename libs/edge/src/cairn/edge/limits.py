"""What one request may take from a process: a body of at most `max_body_bytes`, refused with 413 before it is
read, arriving whole within `body_timeout_s` once the app reads it, else 408, and a place among at most
`max_concurrency` requests at once, else 503 with Retry-After. Every answer is problem+json, as every other
error; uvicorn's own (`limit_concurrency`) would be text/plain."""

import asyncio

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cairn.edge.problems import REFUSAL_REASON, problem_response

# Never refused for being busy: an orchestrator that cannot reach them restarts a process that is only busy.
HEALTH_PATHS = frozenset({"/healthz", "/readyz"})
# Nor is a scrape: a busy process is when its metrics are wanted most.
UNLIMITED_PATHS = HEALTH_PATHS | {"/metrics"}
BUSY_RETRY_AFTER_S = 1


class BodyRefused(HTTPException):
    """Raised from `receive` when a streamed body breaks a limit. An HTTPException, so FastAPI hands it on as it
    is (it turns any other error while reading a body into 400) and the problem handler answers it.
    `Connection: close`: the rest of the body is not worth reading to keep the connection."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(status, detail, headers={"Connection": "close"})


class BodyTooLarge(BodyRefused):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"The request body is larger than {limit} bytes, the limit: send less per request.")


class BodyTooSlow(BodyRefused):
    """A body still incomplete `seconds` after the app began reading it: the header-read timeout ends with the
    headers, so without this a client sending a body a byte now and then would hold its request for ever."""

    def __init__(self, seconds: float) -> None:
        super().__init__(408, f"The request body did not arrive whole within {seconds:g} s: send it without pauses.")


def declared_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


class BodyLimit:
    """ASGI middleware: a Content-Length over the limit is answered 413 before the app runs, and a body without
    one (chunked) is counted as it arrives and cut off with 413 once it passes the limit; a body not whole within
    `body_timeout_s` of the app's first read is answered 408. Once the body is whole, `receive` is handed on
    untimed: waiting for the client to hang up (`http.disconnect`) may rightly take as long as the answer."""

    def __init__(self, app: ASGIApp, max_bytes: int, body_timeout_s: float = 30.0) -> None:
        self.app, self.max_bytes, self.body_timeout_s = app, max_bytes, body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = declared_length(scope)
        if declared is not None and declared > self.max_bytes:
            await _refused(BodyTooLarge(self.max_bytes))(scope, receive, send)
            return
        started = False
        counting = _BodyReader(receive, self.max_bytes, self.body_timeout_s)

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting, sending)
        except BodyRefused as error:  # read outside a route (a middleware reading the body itself)
            if started:
                raise
            await _refused(error)(scope, receive, send)


class _BodyReader:
    """`receive` for the app: counts the body against the size limit and times it against its deadline (set at
    the first read) until the last piece has come; after that, hands `receive` on as it is."""

    def __init__(self, receive: Receive, max_bytes: int, timeout_s: float) -> None:
        self.receive, self.max_bytes, self.timeout_s = receive, max_bytes, timeout_s
        self.received, self.whole = 0, False
        self.deadline: float | None = None

    async def __call__(self) -> Message:
        if self.whole:
            return await self.receive()
        if self.deadline is None:
            self.deadline = asyncio.get_running_loop().time() + self.timeout_s
        try:
            async with asyncio.timeout_at(self.deadline):
                message = await self.receive()
        except TimeoutError as late:
            raise BodyTooSlow(self.timeout_s) from late
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.max_bytes:
                raise BodyTooLarge(self.max_bytes)
            self.whole = not message.get("more_body", False)
        return message


def _refused(error: BodyRefused) -> ASGIApp:
    return problem_response(error.status_code, error.detail, headers=dict(error.headers or {}))


class ConcurrencyLimit:
    """ASGI middleware answering 503 problem+json with Retry-After to a request that would be one more than
    `max_requests` at once, without running it: a client backs off instead of every request slowing down."""

    def __init__(self, app: ASGIApp, max_requests: int) -> None:
        self.app, self.max_requests = app, max_requests
        self.active = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNLIMITED_PATHS:
            await self.app(scope, receive, send)
            return
        if self.active >= self.max_requests:
            detail = f"This process is answering {self.max_requests} requests, its limit: try again in a moment."
            busy = problem_response(503, detail, headers={"Retry-After": str(BUSY_RETRY_AFTER_S)})
            scope[REFUSAL_REASON] = ("overload", "none")
            await busy(scope, receive, send)
            return
        self.active += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1
