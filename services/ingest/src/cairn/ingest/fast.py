"""`POST /v1/messages/batch` without FastAPI's per-request machinery, for the request every adapter sends: a
bearer key that resolves, `Content-Type: application/json`, and a body `{"messages": [1..1000 objects]}`.

FastAPI spends on each request a dependency solve (the key, the body), a pydantic copy of every message dict
into `Batch`, a validation of the returned `BatchResult` against the response model and its middleware and
routing layers: with 5-message requests that is more CPU than the messages themselves. This middleware sits
innermost of the user middleware (inside the trace-context one, so publishes still hand the trace on), answers
such a request itself with the same work (`api.accept_batch`) and the same bytes (the response model's JSON,
202, `application/json`), and hands every other request, including any batch request it does not recognise
as the common case (a missing, malformed or unknown key, another content type, malformed JSON, a body that
does not match `Batch`), to the app unchanged, body included, so every error answer is FastAPI's own.
"""

import json
from typing import Any

from pydantic import TypeAdapter
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cairn.edge.auth import ApiKeys, bearer_key
from cairn.ingest.api import MAX_BATCH, BatchResult, accept_batch
from cairn.platform.runtime import Runtime

PATH = "/v1/messages/batch"
_result_json = TypeAdapter(BatchResult)


def batch_messages(body: bytes) -> list[dict[str, Any]] | None:
    """The messages of a body that `Batch` would accept as they are, or None (let FastAPI judge it)."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    messages = data.get("messages") if type(data) is dict else None
    if type(messages) is not list or not 1 <= len(messages) <= MAX_BATCH:
        return None
    if not all(type(m) is dict for m in messages):
        return None
    return messages


async def _read_body(receive: Receive) -> tuple[bytes, list[Message]]:
    """The whole body, and the messages it came in (to replay them to the app)."""
    chunks, received = [], []
    while True:
        message = await receive()
        received.append(message)
        if message["type"] != "http.request":
            return b"", received
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), received


def _replaying(received: list[Message], receive: Receive) -> Receive:
    pending = list(received)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay


async def _handled(scope: Scope, error: Exception) -> Response:
    """The app's answer to an exception, as its exception middleware gives it; an exception it has no handler
    for goes on up to `cairn.edge.errors` (503 while a dependency, e.g. Redis for incognito items, is away)."""
    handlers: dict[Any, Any] = scope["app"].exception_handlers
    handler = next((handlers[kind] for kind in type(error).__mro__ if kind in handlers), None)
    if handler is None or handler is handlers.get(Exception) or handler is handlers.get(500):
        raise error
    response: Response = await handler(Request(scope), error)
    return response


class BatchFastPath:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != PATH:
            await self.app(scope, receive, send)
            return
        body, received = await _read_body(receive)
        try:
            answer = await self._answer(scope, body) if received[-1]["type"] == "http.request" else None
        except Exception as error:
            answer = await _handled(scope, error)
        if answer is None:
            await self.app(scope, _replaying(received, receive), send)
            return
        await answer(scope, receive, send)

    async def _answer(self, scope: Scope, body: bytes) -> Response | None:
        headers = Headers(scope=scope)
        if headers.get("content-type") != "application/json":
            return None
        key = bearer_key(headers)
        messages = batch_messages(body) if key is not None else None
        if key is None or messages is None:
            return None
        runtime: Runtime = scope["app"].state.runtime
        keys: ApiKeys = runtime.extras["api_keys"]
        tenant = await keys.tenant_for(key)
        if tenant is None:
            return None
        result = await accept_batch(runtime, tenant, messages)
        return Response(_result_json.dump_json(result, by_alias=True), 202, media_type="application/json")
