"""The command API for messages and tenant administration (API.md, command side)."""

import secrets
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, TypeAdapter, ValidationError, WithJsonSchema

from cairn.delivery.publisher import EventPublisher
from cairn.edge.auth import ApiKeys, Tenant, bearer_token, current_tenant
from cairn.edge.problems import Problem, problem_response, validation_problem
from cairn.edge.rate_limits import Limits, count_messages
from cairn.events import INGEST_STREAM, InboundMessage, MessageReceived
from cairn.events.fields import Name
from cairn.events.routing import RoutingError, is_incognito
from cairn.ingest import incognito
from cairn.ingest.audit import Actor
from cairn.ingest.domain import dedup_ids, new_api_key, received, refusal, text_too_large
from cairn.ingest.json_body import VALIDATION_ERROR, JsonBody
from cairn.ingest.settings import IngestSettings
from cairn.ingest.store import AgentConfigs, TenantStore
from cairn.platform.runtime import Runtime, runtime_of, runtime_settings, settings_of

router = APIRouter()
_inbound = TypeAdapter(InboundMessage)


def ingest_settings(request: Request) -> IngestSettings:
    return settings_of(request, IngestSettings)


async def require_admin(request: Request) -> None:
    """401 without a valid credential; 403 for a tenant's API key, which is valid but not allowed here. A wrong
    token counts as a failed login of the client's address, and an address past its failures is answered 429
    before its token is compared (the admin API is not rate-limited otherwise)."""
    settings = ingest_settings(request)
    limits: Limits | None = runtime_of(request).extras.get("limits")
    address = request.client.host if request.client else "unknown"
    if limits is not None and (throttled := await limits.throttled(address)):
        raise throttled
    expected = settings.admin_token.get_secret_value() if settings.admin_token else ""
    token = bearer_token(request)
    if expected and secrets.compare_digest(token, expected):
        return
    keys: ApiKeys = runtime_of(request).extras["api_keys"]
    if await keys.tenant_for(token) is not None:
        raise Problem(403, "A tenant's API key cannot use the admin API: send the admin token.")
    refusal = Problem(401, "This endpoint needs the admin token.")
    raise refusal if limits is None else await limits.admin_failed(address, refusal)


class Accepted(BaseModel):
    event_id: str
    session_key: str
    position: str = Field(
        description="the write's stream position, for consistent_with; for an incognito thread, the message's "
        "position in the thread (incognito threads are never indexed)"
    )


class NewTenant(BaseModel):
    name: Name = Field(min_length=1, max_length=200)


class CreatedTenant(BaseModel):
    tenant_id: str
    api_key: str = Field(description="shown once; only its hash is stored")


MAX_BATCH = 1000  # messages per batch request
# An item is validated on its own (an invalid one gets its own error, the others are kept), so it is read as an
# object; the document describes it as what it must be, the body of `POST /v1/messages` (inline: a `$ref` here
# would be resolved by pydantic, which does not know FastAPI's components), so that a client (or a
# generator of requests) knows what an item takes.
BatchItem = Annotated[dict[str, Any], WithJsonSchema(InboundMessage.model_json_schema())]


class Batch(BaseModel):
    messages: list[BatchItem] = Field(min_length=1, max_length=MAX_BATCH)


class BatchResult(BaseModel):
    accepted: int
    results: list[dict[str, Any]]


batch_body = JsonBody(Batch)


def oversized_text(errors: Sequence[Any], max_bytes: int) -> Problem | None:
    """A text over the model's hard character limit is 413 (too large), like one over the configured byte
    limit, when it is the request's only problem."""
    if len(errors) != 1:
        return None
    error = errors[0]
    text = error.get("input")
    if error.get("type") != "string_too_long" or tuple(error.get("loc", ()))[-1:] != ("text",):
        return None
    if not isinstance(text, str):
        return None
    message = text_too_large(len(text.encode()), len(text), max_bytes)
    return Problem(413, f"The message text is too large: {message}.", [{"field": "text", "message": message}])


async def on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    """Installed on the ingest app: problem+json as everywhere, with 413 for an oversized message text."""
    assert isinstance(exc, RequestValidationError)
    if request.url.path.startswith("/v1/messages"):
        problem = oversized_text(exc.errors(), ingest_settings(request).max_text_bytes)
        if problem is not None:
            return problem_response(problem.status, problem.detail, problem.errors)
    return validation_problem(exc)


def _refuse(message: InboundMessage, max_text_bytes: int) -> None:
    refused = refusal(message, max_text_bytes)
    if refused is not None:
        detail = "The message text is too large" if refused.status == 413 else "The request is invalid"
        raise Problem(
            refused.status, f"{detail}: {refused.message}.", [{"field": refused.field, "message": refused.message}]
        )


def _incognito_key(message: InboundMessage) -> str | None:
    """Only an explicit key can be incognito: derived keys never look like one (see routing)."""
    return message.session_key if message.session_key and is_incognito(message.session_key) else None


async def _keep_incognito(runtime: Runtime, tenant: str, message: InboundMessage, key: str) -> Accepted:
    """In memory only: never published, so never persisted, indexed or compacted."""
    stored = await incognito.append(runtime.extras["incognito"], tenant, key, message)
    return Accepted(event_id=stored.message_id, session_key=key, position=str(stored.position))


def _configs(runtime: Runtime) -> AgentConfigs:
    configs: AgentConfigs = runtime.extras["agent_configs"]
    return configs


async def _event_for(configs: AgentConfigs, tenant: str, message: InboundMessage) -> MessageReceived:
    try:
        return received(tenant, message, await configs.routing(tenant, message.agent_id))
    except RoutingError as error:
        raise Problem(422, str(error), [{"field": error.field, "message": str(error)}]) from error


async def _publish_messages(publisher: EventPublisher, events: list[MessageReceived]) -> list[Accepted]:
    published = await publisher.publish_many(events, dedup_ids(events))
    accepted = []
    for event, ack in zip(events, published, strict=True):
        answered = event
        if ack.duplicate:  # a re-send: answer with the stored event (its id and session), not the one we just built
            answered = MessageReceived.model_validate_json(await publisher.stored(INGEST_STREAM, ack.seq))
        accepted.append(Accepted(event_id=answered.event_id, session_key=answered.session_key, position=str(ack.seq)))
    return accepted


def _item_error(error: ValidationError, max_bytes: int) -> dict[str, Any]:
    oversized = oversized_text(error.errors(), max_bytes)
    if oversized is not None:
        return {"error": {"status": oversized.status, "errors": oversized.errors}}
    errors = [{"field": ".".join(str(p) for p in e["loc"]), "message": e["msg"]} for e in error.errors()]
    return {"error": {"status": 422, "errors": errors}}


@router.post(
    "/v1/messages",
    status_code=202,
    response_model=Accepted,
    tags=["messages"],
    responses={404: {"description": "`session_key` names an incognito thread that ended (or never was)"}},
)
async def post_message(message: InboundMessage, tenant: Tenant, request: Request) -> Accepted:
    """Store one message said on a channel; answers once JetStream has it durably (or, for an incognito
    thread, once it is held in memory)."""
    _refuse(message, ingest_settings(request).max_text_bytes)
    if (key := _incognito_key(message)) is not None:
        return await _keep_incognito(runtime_of(request), tenant, message, key)
    runtime = runtime_of(request)
    event = await _event_for(_configs(runtime), tenant, message)
    await count_messages(runtime.extras, tenant, 1)
    return (await _publish_messages(runtime.publisher, [event]))[0]


@router.post(
    "/v1/messages/batch",
    status_code=202,
    response_model=BatchResult,
    tags=["messages"],
    responses={422: VALIDATION_ERROR},
    openapi_extra=batch_body.openapi_extra,
)
async def post_batch(request: Request) -> Response:
    """Import up to 1000 messages in order; each item is accepted or gets its own error."""
    # Batches are the bulk of ingest, so this route does by hand what FastAPI would do for `batch: Batch,
    # tenant: Tenant` (same order, same errors; see `json_body`): one `validate_json` of the body, the key,
    # and the result's JSON written once, without a dependency solve or a response-model validation.
    received_body = batch_body.read(request.headers.get("content-type"), await request.body())
    tenant = await current_tenant(request)
    result = await accept_batch(runtime_of(request), tenant, received_body.validated().messages)
    return Response(result.model_dump_json(), 202, media_type="application/json")


async def accept_batch(runtime: Runtime, tenant: str, messages: list[dict[str, Any]]) -> BatchResult:
    """The batch route's work once its key and body are valid."""
    results: list[dict[str, Any]] = [{} for _ in messages]
    events: list[tuple[int, MessageReceived]] = []
    max_text_bytes, configs = runtime_settings(runtime, IngestSettings).max_text_bytes, _configs(runtime)
    for index, raw in enumerate(messages):
        try:
            message = _inbound.validate_python(raw)
            _refuse(message, max_text_bytes)
            if (key := _incognito_key(message)) is not None:
                results[index] = (await _keep_incognito(runtime, tenant, message, key)).model_dump()
            else:
                events.append((index, await _event_for(configs, tenant, message)))
        except ValidationError as error:
            results[index] = _item_error(error, max_text_bytes)
        except Problem as problem:
            results[index] = {"error": {"status": problem.status, "errors": problem.errors or []}}
    await count_messages(runtime.extras, tenant, len(events))
    accepted = await _publish_messages(runtime.publisher, [e for _, e in events])
    for (index, _), item in zip(events, accepted, strict=True):
        results[index] = item.model_dump()
    return BatchResult(accepted=sum("error" not in r for r in results), results=results)


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
    tenant = await store.create_tenant(body.name, key, Actor.admin(request.client.host if request.client else None))
    return CreatedTenant(tenant_id=tenant, api_key=key.secret)
