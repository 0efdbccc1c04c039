"""Memory writes (API.md "Memory writes"): put a whole document, append to a daily note, delete.

Each request is checked here (path layout, text, size) before anything is published, then published as
`memory.write-requested` and applied by consolidation, which records the outcome under the request's id
(see `outcomes.py`). The answer waits for that outcome: 201/200 with the new version, 409 for a stale
`If-Match`, 404 for deleting a missing document, 413 for a daily note that would outgrow the limit; or
202 with `pending` when consolidation did not decide within the bound (the write stays queued). A retry
with the same `Idempotency-Key` within an hour gets the first request's answer and writes nothing twice; the
key reused for a different request is refused (422).
"""

import datetime as dt
from typing import Annotated, Literal

from fastapi import APIRouter, Header, Path, Query, Request, Response
from pydantic import BaseModel, Field

from cairn.edge.auth import Tenant
from cairn.edge.problems import Problem
from cairn.events import INGEST_STREAM, MemoryWriteRequested, utc_now
from cairn.events.documents import PATH_PATTERN, daily_path
from cairn.events.envelope import TOKEN_PATTERN
from cairn.events.fields import FreeText
from cairn.ingest.memory import (
    answer,
    idempotency_problem,
    memory_dedup_id,
    today_in,
    version_of,
    write_refusal,
)
from cairn.ingest.outcomes import WriteOutcomes
from cairn.ingest.settings import IngestSettings
from cairn.ingest.store import AgentConfigs
from cairn.platform.runtime import runtime_of, settings_of

router = APIRouter(tags=["memory"])
AgentId = Annotated[str, Field(pattern=TOKEN_PATTERN)]
# Documented, not enforced by FastAPI: `_checked` refuses a path outside the layout with words of its own.
DocumentPath = Annotated[str, Path(json_schema_extra={"pattern": PATH_PATTERN})]
IfMatch = Annotated[
    str | None, Header(description='the version the change is based on ("0": only if the document does not exist)')
]
IdempotencyKey = Annotated[
    str | None,
    Header(
        description="a retry with the same key within an hour gets the first answer, writes nothing; the key "
        "reused for a different request is a 422"
    ),
]
WRITE_RESPONSES: dict[int | str, dict[str, str]] = {
    201: {"description": "created: the document's first version (or first after a delete)"},
    202: {"description": "accepted and queued, not yet applied (pending: true, version null)"},
    404: {"description": "deleting a document that does not exist"},
    409: {"description": "If-Match names a version that is not the current one"},
    413: {"description": "the text, or the daily note it would make, is over the size limit"},
    422: {
        "description": "a path outside the layout, control characters, a malformed If-Match, an Idempotency-Key "
        "used for a different request"
    },
}


class DocumentText(BaseModel):
    agent_id: AgentId = "main"
    text: FreeText = Field(description="the whole document, Markdown (at most 256 KiB in UTF-8)")


class DailyEntry(BaseModel):
    agent_id: AgentId = "main"
    text: FreeText = Field(min_length=1, description="appended to the day's note on a new line")
    date: dt.date | None = Field(default=None, description="the note's day; default: today in the agent's time zone")


class DocumentWritten(BaseModel):
    path: str
    version: int | None = Field(description="the document's version now; null while pending")
    position: str = Field(description="the write's position: pass it as consistent_with to a memory search")
    change: Literal["created", "updated", "deleted", "unchanged"] | None = None
    pending: bool = Field(default=False, description="accepted but not applied within the wait bound")


def _invalid(status: int, field: str, message: str) -> Problem:
    what = "too large" if status == 413 else "invalid"
    return Problem(status, f"The request is {what}: {message}.", [{"field": field, "message": message}])


def _if_match(header: str | None) -> int | None:
    try:
        return version_of(header)
    except ValueError as error:
        raise _invalid(422, "If-Match", str(error)) from error


# A key names one request: its reuse for another (another agent, document, mode, text or If-Match; a daily note
# without a date whose day changed in between) is refused, as the IETF's Idempotency-Key draft asks, rather than
# answered with the first request's outcome, which would tell the client that what it sent was written.
KEY_REUSED = "this Idempotency-Key was used within the hour for a different request; use a new key for a new write"


def _asked(event: MemoryWriteRequested) -> tuple[str, str, str, str, int | None]:
    """What a write asks for, whatever its event id and time."""
    return event.agent_id, event.path, event.mode, event.text, event.if_match


def _checked(path: str, text: str = "") -> None:
    refused = write_refusal(path, text)
    if refused is not None:
        raise _invalid(refused.status, refused.field, refused.message)


async def _apply(
    request: Request, response: Response, event: MemoryWriteRequested, idempotency_key: str | None
) -> DocumentWritten:
    """Publish the request, then answer with what consolidation made of it (see the module docstring)."""
    runtime = runtime_of(request)
    msg_id = None
    if idempotency_key is not None:
        problem = idempotency_problem(idempotency_key)
        if problem is not None:
            raise _invalid(422, "Idempotency-Key", problem)
        msg_id = memory_dedup_id(event.tenant_id, idempotency_key)
    published = await runtime.publisher.publish(event, msg_id)
    request_id, path = event.event_id, event.path
    if published.duplicate:  # a retry: answer for the request that was stored the first time
        first = MemoryWriteRequested.model_validate_json(await runtime.publisher.stored(INGEST_STREAM, published.seq))
        if _asked(first) != _asked(event):  # was answered 200 with the first's answer while nothing was written
            raise _invalid(422, "Idempotency-Key", KEY_REUSED)
        request_id, path = first.event_id, first.path
    outcomes: WriteOutcomes = runtime.extras["write_outcomes"]
    bound = settings_of(request, IngestSettings).memory_write_wait_s
    decided = await outcomes.wait(event.tenant_id, request_id, bound)
    position = str(published.seq)
    if decided is None:
        response.status_code = 202
        return DocumentWritten(path=path, version=None, position=position, pending=True)
    answered = answer(path, event.if_match, decided)
    headers = {"ETag": f'"{decided.version}"'}
    if answered.problem is not None:
        errors = [{"field": answered.field, "message": answered.problem}] if answered.field else None
        raise Problem(answered.status, answered.problem, errors, headers)
    response.status_code = answered.status
    response.headers.update(headers)
    return DocumentWritten(path=path, version=decided.version, position=position, change=answered.change)


@router.put("/v1/memory/files/{path:path}", response_model=DocumentWritten, responses=WRITE_RESPONSES)
async def put_file(
    path: DocumentPath,
    body: DocumentText,
    tenant: Tenant,
    request: Request,
    response: Response,
    if_match: IfMatch = None,
    idempotency_key: IdempotencyKey = None,
) -> DocumentWritten:
    """Create or replace a memory document: `MEMORY.md`, `memory/bank/*.md`, `memory/daily/YYYY-MM-DD.md`,
    `memory/snapshots/*.md` or `memory/summaries/*.md`. Send `If-Match` with the version you read, so as
    never to overwrite a change you have not seen."""
    _checked(path, body.text)
    event = MemoryWriteRequested(
        tenant_id=tenant, agent_id=body.agent_id, path=path, mode="put", text=body.text, if_match=_if_match(if_match)
    )
    return await _apply(request, response, event, idempotency_key)


@router.post("/v1/memory/daily", response_model=DocumentWritten, responses=WRITE_RESPONSES)
async def append_daily(
    body: DailyEntry, tenant: Tenant, request: Request, response: Response, idempotency_key: IdempotencyKey = None
) -> DocumentWritten:
    """Append to a day's note `memory/daily/YYYY-MM-DD.md` (created on first use); the day defaults to
    today in the agent's time zone (its config's `reset.timezone`, UTC unless set)."""
    day = body.date
    if day is None:
        configs: AgentConfigs = runtime_of(request).extras["agent_configs"]
        day = today_in((await configs.get(tenant, body.agent_id)).config.reset.timezone, utc_now())
    path = daily_path(day)
    _checked(path, body.text)
    event = MemoryWriteRequested(tenant_id=tenant, agent_id=body.agent_id, path=path, mode="append", text=body.text)
    return await _apply(request, response, event, idempotency_key)


@router.delete("/v1/memory/files/{path:path}", response_model=DocumentWritten, responses=WRITE_RESPONSES)
async def delete_file(
    path: DocumentPath,
    tenant: Tenant,
    request: Request,
    response: Response,
    agent_id: Annotated[str, Query(pattern=TOKEN_PATTERN)] = "main",
    if_match: IfMatch = None,
    idempotency_key: IdempotencyKey = None,
) -> DocumentWritten:
    """Delete a memory document: reads answer 404 from now on, its earlier versions stay readable."""
    _checked(path)
    event = MemoryWriteRequested(
        tenant_id=tenant, agent_id=agent_id, path=path, mode="delete", if_match=_if_match(if_match)
    )
    return await _apply(request, response, event, idempotency_key)
