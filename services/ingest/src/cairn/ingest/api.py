"""The command API: messages, session commands and tenant administration (API.md, command side)."""

import secrets
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from cairn.events import INGEST_STREAM, InboundMessage, MessageReceived, SessionCommand
from cairn.events.routing import RoutingConfig, RoutingError
from cairn.ingest.domain import dedup_ids, new_api_key, received
from cairn.ingest.settings import IngestSettings
from cairn.ingest.store import TenantStore
from cairn.platform.auth import Tenant, bearer_token
from cairn.platform.problems import Problem
from cairn.platform.publisher import EventPublisher
from cairn.platform.runtime import runtime_of

router = APIRouter()
_inbound = TypeAdapter(InboundMessage)


def require_admin(request: Request) -> None:
    settings = runtime_of(request).settings
    assert isinstance(settings, IngestSettings)
    expected = settings.admin_token.get_secret_value() if settings.admin_token else ""
    if not expected or not secrets.compare_digest(bearer_token(request), expected):
        raise Problem(401, "This endpoint needs the admin token.")


class Accepted(BaseModel):
    event_id: str
    session_key: str
    position: str


class NewTenant(BaseModel):
    name: str = Field(min_length=1, max_length=200)


class CreatedTenant(BaseModel):
    tenant_id: str
    api_key: str = Field(description="shown once; only its hash is stored")


class Batch(BaseModel):
    messages: list[dict[str, Any]] = Field(min_length=1, max_length=1000)


class BatchResult(BaseModel):
    accepted: int
    results: list[dict[str, Any]]


class ResetRequest(BaseModel):
    agent_id: str = Field(default="main", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    reason: Literal["new", "reset", "api"] = "api"


class ResetAccepted(BaseModel):
    position: str


def _event_for(tenant: str, message: InboundMessage) -> MessageReceived:
    try:
        return received(tenant, message, RoutingConfig())
    except RoutingError as error:
        raise Problem(422, str(error), [{"field": error.field, "message": str(error)}]) from error


async def _publish_messages(publisher: EventPublisher, events: list[MessageReceived]) -> list[Accepted]:
    published = await publisher.publish_many(events, dedup_ids(events))
    accepted = []
    for event, ack in zip(events, published, strict=True):
        event_id = event.event_id
        if ack.duplicate:  # a re-send: answer with the stored event, not the one we just built
            stored = await publisher.js.get_msg(INGEST_STREAM, ack.seq)
            event_id = MessageReceived.model_validate_json(stored.data or b"").event_id
        accepted.append(Accepted(event_id=event_id, session_key=event.session_key, position=str(ack.seq)))
    return accepted


@router.post("/v1/messages", status_code=202, response_model=Accepted, tags=["messages"])
async def post_message(message: InboundMessage, tenant: Tenant, request: Request) -> Accepted:
    """Store one message said on a channel; answers once JetStream has it durably."""
    publisher = runtime_of(request).publisher
    return (await _publish_messages(publisher, [_event_for(tenant, message)]))[0]


@router.post("/v1/messages/batch", status_code=202, response_model=BatchResult, tags=["messages"])
async def post_batch(batch: Batch, tenant: Tenant, request: Request) -> BatchResult:
    """Import up to 1000 messages in order; each item is accepted or gets its own error."""
    results: list[dict[str, Any]] = [{} for _ in batch.messages]
    events: list[tuple[int, MessageReceived]] = []
    for index, raw in enumerate(batch.messages):
        try:
            events.append((index, _event_for(tenant, _inbound.validate_python(raw))))
        except ValidationError as error:
            results[index] = {
                "error": {
                    "status": 422,
                    "errors": [
                        {"field": ".".join(str(p) for p in e["loc"]), "message": e["msg"]} for e in error.errors()
                    ],
                }
            }
        except Problem as problem:
            results[index] = {"error": {"status": problem.status, "errors": problem.errors or []}}
    accepted = await _publish_messages(runtime_of(request).publisher, [e for _, e in events])
    for (index, _), item in zip(events, accepted, strict=True):
        results[index] = item.model_dump()
    return BatchResult(accepted=len(accepted), results=results)


@router.post("/v1/sessions/{session_key}/reset", status_code=202, response_model=ResetAccepted, tags=["sessions"])
async def reset_session(session_key: str, body: ResetRequest, tenant: Tenant, request: Request) -> ResetAccepted:
    """Start a fresh history window; nothing is deleted and the session id is kept."""
    command = SessionCommand(
        tenant_id=tenant, agent_id=body.agent_id, command="reset", session_key=session_key, reason=body.reason
    )
    published = await runtime_of(request).publisher.publish(command)
    return ResetAccepted(position=str(published.seq))


@router.post(
    "/v1/admin/tenants",
    status_code=201,
    response_model=CreatedTenant,
    tags=["admin"],
    dependencies=[Depends(require_admin)],
)
async def create_tenant(body: NewTenant, request: Request) -> CreatedTenant:
    """Create a tenant and its first API key; the key is shown only in this answer."""
    key = new_api_key()
    store: TenantStore = runtime_of(request).extras["tenants"]
    tenant = await store.create_tenant(body.name, key)
    return CreatedTenant(tenant_id=tenant, api_key=key.secret)
