"""What one request may take from a process: a body of at most `max_body_bytes`, refused with 413 before it is
read, and a place among at most `max_concurrency` requests at once, else 503 with Retry-After. Both answers are
problem+json, as every other error; uvicorn's own (`limit_concurrency`) would be text/plain."""

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cairn.edge.problems import REFUSAL_REASON, problem_response

# Never refused for being busy: an orchestrator that cannot reach them restarts a process that is only busy.
HEALTH_PATHS = frozenset({"/healthz", "/readyz"})
# Nor is a scrape: a busy process is when its metrics are wanted most.
UNLIMITED_PATHS = HEALTH_PATHS | {"/metrics"}
BUSY_RETRY_AFTER_S = 1


class BodyTooLarge(HTTPException):
    """Raised from `receive` when a streamed body passes the limit. An HTTPException, so FastAPI hands it on
    as it is (it turns any other error while reading a body into 400) and the problem handler answers it.
    `Connection: close`: the rest of the body is not worth reading to keep the connection."""

    def __init__(self, limit: int) -> None:
        detail = f"The request body is larger than {limit} bytes, the limit: send less per request."
        super().__init__(413, detail, headers={"Connection": "close"})


def declared_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


class BodyLimit:
    """ASGI middleware: a Content-Length over the limit is answered 413 before the app runs, and a body without
    one (chunked) is counted as it arrives and cut off with 413 once it passes the limit."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = declared_length(scope)
        if declared is not None and declared > self.max_bytes:
            await _too_large(BodyTooLarge(self.max_bytes))(scope, receive, send)
            return
        received, started = 0, False

        async def counting() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting, sending)
        except BodyTooLarge as error:  # read outside a route (a middleware reading the body itself)
            if started:
                raise
            await _too_large(error)(scope, receive, send)


def _too_large(error: BodyTooLarge) -> ASGIApp:
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
