"""What a request that fails with an exception is answered, decided in this one place for every service: a
dependency that is down (Postgres, NATS, Redis) is 503 problem+json with Retry-After, so a client retries
instead of giving up; anything else is 500 problem+json with a trace id its log line shares. Either is a whole
response, so the connection stays open for the client's next request (uvicorn's own 500 closes it)."""

import logging
import secrets

import asyncpg
from nats import errors as nats_errors
from nats.js import errors as js_errors
from opentelemetry import trace
from redis.exceptions import RedisError
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cairn.delivery.publisher import AckTimeout, acks_within
from cairn.edge.problems import REFUSAL_REASON, problem_response
from cairn.storage.postgres import is_lost_connection

log = logging.getLogger(__name__)
RETRY_AFTER_S = 1

POSTGRES_DOWN = (
    asyncpg.PostgresConnectionError,  # class 08: refused, lost or dropped connections
    asyncpg.exceptions.OperatorInterventionError,  # class 57: shutting down, starting up, statement cancelled
    asyncpg.exceptions.InsufficientResourcesError,  # class 53: too many connections, disk full
)
NATS_DOWN = (
    nats_errors.ConnectionClosedError,
    nats_errors.ConnectionDrainingError,
    nats_errors.ConnectionReconnectingError,
    nats_errors.NoServersError,
    nats_errors.NoRespondersError,
    nats_errors.OutboundBufferLimitError,  # the buffer that holds publishes while reconnecting is full
    nats_errors.StaleConnectionError,
    js_errors.NoStreamResponseError,  # JetStream is not answering
    js_errors.ServiceUnavailableError,
)
# The first package in a traceback that names the dependency a bare OSError or TimeoutError came from.
_CALLERS = (("asyncpg", "Postgres"), ("nats", "NATS"), ("redis", "Redis"))
_DEPENDENCY_LABELS = {"Postgres": "postgres", "NATS": "nats", "Redis": "redis"}


def unavailable_dependency(error: BaseException) -> str | None:
    """The dependency an exception says is down, or None when it says nothing of the kind. Every OSError counts:
    a service reads no files while it answers, so one is a socket to a dependency (a refused TCP port, a missing
    Unix socket, a connect timeout)."""
    if isinstance(error, (AckTimeout, *NATS_DOWN)):
        return "NATS"
    if isinstance(error, POSTGRES_DOWN) or is_lost_connection(error):
        return "Postgres"
    if isinstance(error, RedisError):
        return "Redis"
    if isinstance(error, OSError):
        return _named_in_traceback(error)
    return None


def _named_in_traceback(error: BaseException) -> str:
    frame = error.__traceback__
    while frame is not None:
        module = str(frame.tb_frame.f_globals.get("__name__", ""))
        for package, name in _CALLERS:
            if module == package or module.startswith(package + "."):
                return name
        frame = frame.tb_next
    return "A dependency"


def unavailable_response(dependency: str, method: str) -> JSONResponse:
    detail = f"{dependency} is unavailable: try again in a moment."
    if method not in ("GET", "HEAD"):  # a publish that timed out may still land, so nothing is claimed lost
        detail += (
            " If this was a write it may still have been kept: sending it again with the same message_id "
            "(or Idempotency-Key) keeps it once."
        )
    return problem_response(503, detail, headers={"Retry-After": str(RETRY_AFTER_S)})


def trace_id() -> str | None:
    """The current span's trace id (the caller's `traceparent`, or our own span when tracing is on)."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def unexpected_response(reference: str) -> JSONResponse:
    detail = f"Something went wrong on our side. Quote trace id {reference} when you report it."
    return problem_response(500, detail, extra={"trace_id": reference})


class ErrorsAsProblems:
    """ASGI middleware answering what a request's exception means (see the module docstring), and bounding how
    long the request waits for JetStream's acks (`acks_within`). An exception after the response has started
    goes on up: only closing the connection can tell the client that answer is broken."""

    def __init__(self, app: ASGIApp, dependency_timeout_s: float) -> None:
        self.app = app
        self.dependency_timeout_s = dependency_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            with acks_within(self.dependency_timeout_s):
                await self.app(scope, receive, sending)
        except ClientDisconnect:
            return  # the client left while its body was read: there is no one to answer
        except Exception as error:  # the last resort for every route: answered and logged, never swallowed
            if started:
                raise
            await self._answer(scope, error)(scope, receive, send)

    def _answer(self, scope: Scope, error: Exception) -> JSONResponse:
        method, path = scope["method"], scope["path"]
        dependency = unavailable_dependency(error)
        if dependency is not None:
            log.warning("%s %s: %s is unavailable: %s", method, path, dependency, _described(error))
            scope[REFUSAL_REASON] = ("dependency_down", _DEPENDENCY_LABELS.get(dependency, "unknown"))
            return unavailable_response(dependency, method)
        reference = trace_id() or secrets.token_hex(16)  # generated when no trace is current: logged below
        log.error("%s %s failed unexpectedly (trace id %s)", method, path, reference, exc_info=error)
        trace.get_current_span().record_exception(error)  # a no-op unless a span is being recorded
        return unexpected_response(reference)


def _described(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
