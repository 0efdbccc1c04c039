"""Memory records on the query side (API.md): `GET /v1/memory/records` lists an agent's current records, or
those valid at `as_of` (world time), or the whole history; `GET /v1/memory/records/{record_id}` reads one with
its provenance and the values it replaced. Routes only; reads are `records_queries`."""

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field

from cairn.edge.auth import Tenant
from cairn.edge.problems import Problem
from cairn.events.envelope import POSITION_PATTERN
from cairn.events.fields import Name
from cairn.platform.runtime import runtime_of, settings_of
from cairn.recall.progress import wait_until
from cairn.recall.records_queries import Filters, RecordReads
from cairn.recall.settings import RecallSettings

router = APIRouter(tags=["memory"])
AgentId = Annotated[str, Query(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
Kind = Literal["profile", "preference", "event", "plan", "lesson", "project"]
MAX_LIMIT = 500
POLL_S = 0.05
_PROBLEM_JSON: dict[str, Any] = {"application/problem+json": {}}
PROBLEMS: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such record for this agent and tenant", "content": _PROBLEM_JSON},
    422: {"description": "A query parameter is invalid; `errors` names it", "content": _PROBLEM_JSON},
}


class Provenance(BaseModel):
    session_key: str | None
    session_id: str | None
    message_ids: list[str]
    origin: Literal["owner", "agent", "untrusted", "system"]


class Bank(BaseModel):
    path: str
    line: int | None = Field(description="the line it renders to now; null once retired or not rendered yet")


class Record(BaseModel):
    record_id: str
    kind: Kind
    entity: str
    relation: str
    text: str
    original: str
    language: str
    valid_from: datetime
    valid_until: datetime | None
    recorded_at: datetime
    retired_at: datetime | None
    retired_reason: Literal["superseded", "edited"] | None
    superseded_by: str | None
    provenance: Provenance
    importance: float
    explicit: bool
    pinned: bool
    pending: Literal["judgement"] | None = Field(
        description="judgement: close to another record (cosine 0.7-0.92) and no model was configured to judge"
    )
    merged_ids: list[str] = Field(description="ids of requests merged into this record as repetitions")
    bank: Bank


class RecordList(BaseModel):
    records: list[Record]
    next_cursor: str | None = Field(default=None, description="pass as cursor for the next page")
    indexing: bool = Field(default=False, description="`consistent_with` was not reached within the bound")


class RecordWithHistory(Record):
    history: list[Record] = Field(description="the values this record replaced, newest first")
    indexing: bool = False


def _record(row: dict[str, Any]) -> Record:
    provenance = Provenance(
        session_key=row["session_key"], session_id=row["session_id"], message_ids=row["message_ids"],
        origin=row["origin"],
    )  # fmt: skip
    bank = Bank(path=row["bank_path"], line=row["bank_line"])
    return Record.model_validate({**row, "provenance": provenance, "bank": bank})


def _reads(request: Request) -> RecordReads:
    reads: RecordReads = runtime_of(request).extras["records"]
    return reads


async def _caught_up(request: Request, tenant: str, agent_id: str, consistent_with: str | None) -> bool:
    if consistent_with is None:
        return True
    reads, bound = _reads(request), settings_of(request, RecallSettings).consistency_wait_s

    async def reached() -> bool:
        return await reads.applied(tenant, agent_id, int(consistent_with))

    return await wait_until(reached, bound, POLL_S, None)


ConsistentWith = Annotated[
    str | None, Query(pattern=POSITION_PATTERN, description="the position a POST /v1/memory/records answered")
]


@router.get("/v1/memory/records", response_model=RecordList, responses=PROBLEMS)
async def list_records(
    tenant: Tenant,
    request: Request,
    agent_id: AgentId = "main",
    kind: Kind | None = None,
    entity: Annotated[Name | None, Query(min_length=1, max_length=200)] = None,
    as_of: Annotated[datetime | None, Query(description="RFC 3339: the records valid at that (world) time")] = None,
    include_history: Annotated[bool, Query(description="superseded and retired records too")] = False,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 100,
    cursor: Annotated[str | None, Query(pattern=UUID_PATTERN, description="next_cursor of the previous page")] = None,
    consistent_with: ConsistentWith = None,
) -> RecordList:
    """An agent's memory records: current ones by default; with `as_of`, those valid at that time (what was true
    then, as known now); with `include_history`, every record, superseded and retired ones included."""
    if as_of is not None and as_of.tzinfo is None:
        message = "as_of must be an RFC 3339 time with an offset, such as 2026-12-06T09:30:00+08:00"
        raise Problem(422, f"The request is invalid: {message}.", [{"field": "as_of", "message": message}])
    caught_up = await _caught_up(request, tenant, agent_id, consistent_with)
    filters = Filters(kind, entity.casefold() if entity else None, as_of, include_history)
    rows = await _reads(request).records(tenant, agent_id, filters, cursor, limit + 1)
    records = [_record(r) for r in rows[:limit]]
    next_cursor = records[-1].record_id if len(rows) > limit else None
    return RecordList(records=records, next_cursor=next_cursor, indexing=not caught_up)


@router.get("/v1/memory/records/{record_id}", response_model=RecordWithHistory, responses=PROBLEMS)
async def read_record(
    record_id: Annotated[str, Path(pattern=UUID_PATTERN)],
    tenant: Tenant,
    request: Request,
    agent_id: AgentId = "main",
    consistent_with: ConsistentWith = None,
) -> RecordWithHistory:
    """One record with its provenance and the values it replaced; the id of a request merged into a record as a
    repetition reads that record."""
    caught_up = await _caught_up(request, tenant, agent_id, consistent_with)
    row = await _reads(request).record(tenant, agent_id, record_id.lower())
    if row is None:
        raise Problem(404, f"There is no memory record {record_id} for agent {agent_id!r}.")
    history = [_record(r) for r in await _reads(request).history(tenant, row["record_id"])]
    return RecordWithHistory.model_validate(
        {**_record(row).model_dump(), "history": history, "indexing": not caught_up}
    )
