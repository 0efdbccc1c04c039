"""Memory records on the command side (API.md "Memory writes"): `POST /v1/memory/records` adds one fact
explicitly, as an agent's `add_memory` tool would. The request is published as `memory.record-requested` and
answered 202 once JetStream has it; consolidation dedups it against the agent's records and renders it into the
bank. The `record_id` answered is readable at recall at once with `consistent_with=<position>`; a request that
repeats a record is found under the record it merged into."""

from typing import Annotated, Literal

from fastapi import APIRouter, Header, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator

from cairn.edge.auth import Tenant
from cairn.edge.problems import Problem
from cairn.events import INGEST_STREAM, RecordRequested, new_event_id
from cairn.events.envelope import TOKEN_PATTERN
from cairn.events.fields import EventTime, FreeText, Name
from cairn.events.models import MAX_RECORD_CHARS
from cairn.ingest.memory import idempotency_problem, memory_dedup_id
from cairn.platform.runtime import runtime_of

router = APIRouter(tags=["memory"])
AgentId = Annotated[str, Field(pattern=TOKEN_PATTERN)]
Kind = Literal["profile", "preference", "event", "plan", "lesson", "project"]
MAX_MESSAGE_IDS = 100
MAX_LABEL_CHARS = 200


class RecordBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: AgentId = "main"
    text: FreeText = Field(
        min_length=1, max_length=MAX_RECORD_CHARS, description="the fact as one sentence, as it will be rendered"
    )
    kind: Kind | None = Field(
        default=None, description="default: preference when it says a like or dislike, else profile"
    )
    entity: Name | None = Field(
        default=None, min_length=1, max_length=MAX_LABEL_CHARS, description="who or what it is about; default user"
    )
    relation: Name | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_LABEL_CHARS,
        description="what about it (diet, home city): a new value for the same entity and relation supersedes "
        "the old one (profile, preference, project, lesson); default: the fact's own words, never superseded",
    )
    importance: float = Field(default=1.0, ge=0.0, le=1.0)
    occurred_at: EventTime | None = Field(default=None, description="when it was said: the record is valid from then")
    session_key: Name | None = Field(default=None, min_length=1, max_length=512)
    message_ids: list[Annotated[Name, Field(min_length=1, max_length=256)]] = Field(
        default_factory=list, max_length=MAX_MESSAGE_IDS
    )

    @field_validator("text")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("the fact must hold more than whitespace")
        return text


class RecordAccepted(BaseModel):
    record_id: str
    position: str = Field(description="the request's position: pass it as consistent_with to read the record")


RESPONSES: dict[int | str, dict[str, str]] = {
    422: {"description": "a field is invalid or over its limit; `errors` names it"},
}


@router.post("/v1/memory/records", status_code=202, response_model=RecordAccepted, responses=RESPONSES)
async def add_record(
    body: RecordBody,
    tenant: Tenant,
    request: Request,
    idempotency_key: Annotated[str | None, Header(description="a retry with the same key within an hour")] = None,
) -> RecordAccepted:
    """Keep one fact as a memory record (an explicit memory, importance 1.0 unless given)."""
    when = {"occurred_at": body.occurred_at} if body.occurred_at is not None else {}
    event = RecordRequested(
        tenant_id=tenant, agent_id=body.agent_id, record_id=new_event_id(), text=body.text, kind=body.kind,
        entity=body.entity, relation=body.relation, importance=body.importance, session_key=body.session_key,
        message_ids=tuple(body.message_ids), origin="agent", **when,
    )  # fmt: skip
    msg_id = None
    if idempotency_key is not None:
        problem = idempotency_problem(idempotency_key)
        if problem is not None:
            raise Problem(
                422, f"The request is invalid: {problem}.", [{"field": "Idempotency-Key", "message": problem}]
            )
        msg_id = memory_dedup_id(tenant, f"record:{idempotency_key}")
    runtime = runtime_of(request)
    published = await runtime.publisher.publish(event, msg_id)
    record_id = event.record_id
    if published.duplicate:  # a retry: the first request's record
        first = RecordRequested.model_validate_json(await runtime.publisher.stored(INGEST_STREAM, published.seq))
        record_id = first.record_id
    return RecordAccepted(record_id=record_id, position=str(published.seq))
