"""`POST /v1/messages/batch` answered by `cairn.ingest.fast.BatchFastPath` (no FastAPI dependency solve, body
model or response-model validation): the common request gets the very bytes the FastAPI route gives, every
other request goes on to the route with its body, so its answer is the route's own."""

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.middleware import Middleware
from starlette.types import Receive, Scope, Send

from cairn.ingest.app import create_app
from cairn.ingest.fast import BatchFastPath
from cairn.ingest.settings import IngestSettings
from cairn.local import LocalStack

pytestmark = pytest.mark.integration


class Apps:
    def __init__(self, plain: FastAPI, fast: FastAPI, key: str) -> None:
        self.plain, self.fast, self.key = plain, fast, key
        self.passed_on: list[bytes] = []  # bodies the fast path handed to the app behind it

    async def _inner(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.passed_on.append(body)
        chunks = [{"type": "http.request", "body": body, "more_body": False}]

        async def replay() -> Any:
            return chunks.pop(0)

        await self.fast(scope, replay, send)  # the whole app, fast path included: the answer is the route's

    async def watched(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The fast path in front of a recorder of what it passes on; `scope["app"]` as FastAPI sets it."""
        scope["app"] = self.fast
        await BatchFastPath(self._inner)(scope, receive, send)


def _fast(middleware: Middleware) -> bool:
    return getattr(middleware.cls, "__name__", None) == BatchFastPath.__name__


@pytest.fixture
async def apps(stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Apps]:
    for name in ("CAIRN_POSTGRES_URL", "CAIRN_NATS_URL", "CAIRN_REDIS_URL", "CAIRN_ADMIN_TOKEN"):
        monkeypatch.setenv(name, stack.service_env("ingest")[name])
    settings = IngestSettings()
    fast, plain = create_app(settings), create_app(settings)
    plain.user_middleware = [m for m in plain.user_middleware if not _fast(m)]
    assert _fast(fast.user_middleware[-1])  # innermost
    transport = httpx.ASGITransport(app=plain)
    async with (
        plain.router.lifespan_context(plain),
        fast.router.lifespan_context(fast),
        httpx.AsyncClient(transport=transport, base_url="http://t") as client,
    ):
        admin = {"authorization": f"Bearer {stack.state.admin_token}"}
        created = await client.post("/v1/admin/tenants", json={"name": "fast"}, headers=admin)
        yield Apps(plain, fast, created.raise_for_status().json()["api_key"])


async def _post(app: Any, body: bytes, headers: dict[str, str]) -> tuple[int, list[tuple[str, str]], bytes]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        response = await client.post("/v1/messages/batch", content=body, headers=headers)
        return response.status_code, list(response.headers.multi_items()), response.content


def _messages(run: str) -> list[dict[str, Any]]:
    return [
        {"agent_id": "main", "channel": "webchat", "peer_id": "p1", "role": "user", "text": f"héllo {run}",
         "message_id": f"{run}-1"},
        {"agent_id": "main", "channel": "webchat", "peer_id": "p2", "role": "assistant", "text": "ok",
         "message_id": f"{run}-2", "chat_type": "direct"},
        {"agent_id": "main", "channel": "webchat", "role": "user"},  # no text: the item's own 422
        {"agent_id": "main", "channel": "webchat", "peer_id": "p1", "role": "user", "text": "x" * 70_000,
         "message_id": f"{run}-3"},  # over max_text_bytes: the item's own 413
        {"agent_id": "main", "channel": "webchat", "role": "user", "text": "hi",
         "session_key": "bad key"},  # a malformed explicit key: the item's 422
        {"agent_id": "incognito:x", "channel": "webchat", "peer_id": "p1", "role": "user", "text": "hi",
         "message_id": f"{run}-4"},  # a routing refusal: 422
    ]  # fmt: skip


async def test_the_common_batch_is_answered_by_the_fast_path_with_the_routes_bytes(apps: Apps) -> None:
    """Every accepted item carries a message id, so the second post of the same body is deduplicated and
    answers with the stored events and positions: the two answers must be equal byte for byte."""
    body = json.dumps({"messages": _messages(uuid.uuid4().hex)}).encode()
    headers = {"authorization": f"Bearer {apps.key}", "content-type": "application/json"}
    by_route = await _post(apps.plain, body, headers)
    by_fast_path = await _post(apps.watched, body, headers)
    results = json.loads(by_route[2])["results"]
    assert by_route[0] == 202
    assert sum("error" in r for r in results) >= 3, results
    assert by_fast_path[:2] == by_route[:2]
    assert by_fast_path[2].decode() == by_route[2].decode()
    assert apps.passed_on == []  # answered without the FastAPI route


@pytest.mark.parametrize(
    ("case", "body", "headers"),
    [
        ("no key", {"messages": [{}]}, {"authorization": "", "content-type": "application/json"}),
        ("unknown key", {"messages": [{}]}, {"authorization": "Bearer ck_nope", "content-type": "application/json"}),
        ("not bearer", {"messages": [{}]}, {"authorization": "Basic abc", "content-type": "application/json"}),
        ("no messages", {"messages": []}, {"content-type": "application/json"}),
        ("too many", {"messages": [{}] * 1001}, {"content-type": "application/json"}),
        ("not an object", {"messages": [1]}, {"content-type": "application/json"}),
        ("messages missing", {"other": 1}, {"content-type": "application/json"}),
        ("a list body", [{"messages": [{}]}], {"content-type": "application/json"}),
        ("malformed json", b'{"messages": [', {"content-type": "application/json"}),
        ("text/plain", {"messages": [{"agent_id": "main"}]}, {"content-type": "text/plain"}),
        ("no content type", {"messages": [{"agent_id": "main"}]}, {}),
    ],
)
async def test_any_other_batch_request_is_the_routes_with_its_body(
    apps: Apps, case: str, body: Any, headers: dict[str, str]
) -> None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"authorization": f"Bearer {apps.key}", **headers}
    by_route = await _post(apps.plain, raw, headers)
    by_fast_path = await _post(apps.watched, raw, headers)
    assert by_fast_path == by_route, case
    assert by_route[0] != 202 or case in ("text/plain", "no content type"), case
    assert apps.passed_on == [raw], case
