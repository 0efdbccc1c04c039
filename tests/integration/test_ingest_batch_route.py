"""`POST /v1/messages/batch` reads its body itself (`cairn.ingest.json_body`) instead of declaring it to
FastAPI: every answer, accepted or refused, must be the very bytes the route gave when it declared
`batch: Batch, tenant: Tenant` and a response model, which the reference app below still does; and the
OpenAPI document must describe the operation as it did."""

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI, Request
from starlette.routing import BaseRoute

from cairn.edge.auth import Tenant
from cairn.edge.openapi import document_problems
from cairn.ingest import api
from cairn.ingest.api import Batch, BatchResult, accept_batch
from cairn.ingest.app import create_app
from cairn.ingest.settings import IngestSettings
from cairn.local import LocalStack
from cairn.platform.runtime import runtime_of

pytestmark = pytest.mark.integration
PATH = "/v1/messages/batch"
declared = APIRouter()


@declared.post(PATH, status_code=202, response_model=BatchResult, tags=["messages"])
async def post_batch(batch: Batch, tenant: Tenant, request: Request) -> BatchResult:
    """Import up to 1000 messages in order; each item is accepted or gets its own error."""
    return await accept_batch(runtime_of(request), tenant, batch.messages)


def declared_app(settings: IngestSettings, monkeypatch: pytest.MonkeyPatch) -> FastAPI:
    """The ingest app with the batch route as FastAPI writes it from its parameters (the route before
    json_body), in the same place among the routes, and FastAPI's own OpenAPI document."""
    with monkeypatch.context() as patch:
        routes = [next(iter(declared.routes)) if _path(r) == PATH else r for r in api.router.routes]
        patch.setattr(api, "router", APIRouter(routes=routes))
        app = create_app(settings)
    vars(app).pop("openapi", None)  # FastAPI's method again, not the one `document_bodies` set ...
    document_problems(app)  # ... under the edge's problem answers, which every service's document carries
    return app


def _path(route: BaseRoute) -> str | None:
    return getattr(route, "path", None)


class Apps:
    def __init__(self, app: FastAPI, reference: FastAPI, key: str) -> None:
        self.app, self.reference, self.key = app, reference, key


@pytest.fixture
async def apps(stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Apps]:
    for name in ("CAIRN_POSTGRES_URL", "CAIRN_NATS_URL", "CAIRN_REDIS_URL", "CAIRN_ADMIN_TOKEN"):
        monkeypatch.setenv(name, stack.service_env("ingest")[name])
    settings = IngestSettings()
    app, reference = create_app(settings), declared_app(settings, monkeypatch)
    assert [_path(r) for r in reference.routes] == [_path(r) for r in app.routes]
    async with (
        app.router.lifespan_context(app),
        reference.router.lifespan_context(reference),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client,
    ):
        admin = {"authorization": f"Bearer {stack.state.admin_token}"}
        created = await client.post("/v1/admin/tenants", json={"name": "batch-route"}, headers=admin)
        yield Apps(app, reference, created.raise_for_status().json()["api_key"])


Answer = tuple[int, list[tuple[str, str]], bytes]


async def _post(app: FastAPI, body: bytes, headers: dict[str, str]) -> Answer:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        response = await client.post(PATH, content=body, headers=headers)
        return response.status_code, list(response.headers.multi_items()), response.content


async def _both(apps: Apps, body: bytes, headers: dict[str, str]) -> tuple[Answer, Answer]:
    """The reference's answer, then the route's to the same request: every accepted item carries a message
    id, so the second post is deduplicated and answers with the stored events and positions."""
    return await _post(apps.reference, body, headers), await _post(apps.app, body, headers)


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


def _one(run: str) -> dict[str, Any]:
    return {"messages": [{"agent_id": "main", "peer_id": "p1", "text": "hi", "message_id": f"{run}-1"}]}


async def test_a_batch_is_answered_with_the_declared_routes_bytes(apps: Apps) -> None:
    body = json.dumps({"messages": _messages(uuid.uuid4().hex)}).encode()
    headers = {"authorization": f"Bearer {apps.key}", "content-type": "application/json"}
    by_reference, by_route = await _both(apps, body, headers)
    results = json.loads(by_route[2])["results"]
    assert by_route[0] == 202
    assert [("error" in r) for r in results] == [False, False, True, True, True, True], results
    assert by_route[:2] == by_reference[:2]
    assert by_route[2].decode() == by_reference[2].decode()


NESTED = b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


@pytest.mark.parametrize(
    ("case", "body", "headers", "status"),
    [
        ("no key", {"messages": [{}]}, {"authorization": ""}, 401),
        ("unknown key", {"messages": [{}]}, {"authorization": "Bearer ck_nope"}, 401),
        ("not bearer", {"messages": [{}]}, {"authorization": "Basic abc"}, 401),
        ("no key, no messages", {"messages": []}, {"authorization": ""}, 401),
        ("no key, malformed json", b'{"messages": [', {"authorization": ""}, 422),
        ("no messages", {"messages": []}, {}, 422),
        ("too many", {"messages": [{}] * 1001}, {}, 422),
        ("not an object", {"messages": [1, "x", {}]}, {}, 422),
        ("messages not a list", {"messages": {"a": 1}}, {}, 422),
        ("messages missing", {"other": 1}, {}, 422),
        ("a list body", [{"messages": [{}]}], {}, 422),
        ("a string body", "messages", {}, 422),
        ("null body", None, {}, 422),
        ("malformed json", b'{"messages": [', {}, 422),
        ("trailing garbage", b'{"messages": [{}]} x', {}, 422),
        ("empty body", b"", {}, 422),
        ("not utf-8", b'{"messages": [{"text": "\xff\xfe\xfa"}]}', {}, 400),
        ("nested past the parser's depth", NESTED, {}, 400),
        ("text/plain", {"messages": [{"agent_id": "main"}]}, {"content-type": "text/plain"}, 422),
        ("no content type", {"messages": [{"agent_id": "main"}]}, {"content-type": ""}, 422),
        ("json with a charset", "one", {"content-type": "application/json; charset=utf-8"}, 202),
        ("a +json type", "one", {"content-type": "application/vnd.cairn+json"}, 202),
        ("utf-16", "utf-16", {}, 202),
        ("NaN", b'{"messages": [{"text": NaN}]}', {}, 202),  # the item's own 422: its text is no string
    ],
)
async def test_any_other_request_is_answered_as_the_declared_route_did(
    apps: Apps, case: str, body: Any, headers: dict[str, str], status: int
) -> None:
    run = uuid.uuid4().hex
    if body == "one":
        raw = json.dumps(_one(run)).encode()
    elif body == "utf-16":
        raw = json.dumps(_one(run)).encode("utf-16")
    else:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = {"authorization": f"Bearer {apps.key}", "content-type": "application/json", **headers}
    by_reference, by_route = await _both(apps, raw, {k: v for k, v in sent.items() if v})
    assert by_reference[0] == status, (case, by_reference)
    assert by_route == by_reference, case


def test_the_openapi_document_is_the_declared_routes(apps: Apps) -> None:
    """Byte for byte, member order included: the route's `openapi_extra`, `responses` and the schema that
    `document_bodies` adds say what FastAPI derived from the declared parameters."""
    document, declared_document = apps.app.openapi(), apps.reference.openapi()
    body = declared_document["paths"][PATH]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Batch"}
    assert "Batch" in declared_document["components"]["schemas"]
    assert json.dumps(document) == json.dumps(declared_document)
