"""Recall traces (API.md, query side): `GET /v1/recall/traces/{trace_id}` and `GET /v1/recall/traces`, the
latest traces of a session. Routes only; the store is `recall_traces`."""

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from cairn.edge.auth import Tenant
from cairn.edge.problems import Problem
from cairn.events.fields import Name
from cairn.platform.runtime import runtime_of
from cairn.recall.recall_traces import RecallTrace, TraceStore

router = APIRouter(tags=["recall"])
_PROBLEM_JSON: dict[str, Any] = {"application/problem+json": {}}
PROBLEMS: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such trace for this tenant (or it is past its retention)", "content": _PROBLEM_JSON},
}


class Trace(BaseModel):
    trace_id: str
    agent_id: str
    session_key: str
    query: str = Field(description="what was searched with: the message, and in `recent` mode the turns before it")
    lane: int | None = Field(description="1: the deterministic lane answered, 2: the memory sub-agent; null: none")
    outcome: str = Field(description="injected | none | skipped | timeout | circuit_open")
    reason: str | None
    candidates: list[dict[str, Any]] = Field(description="what the lanes found, with scores")
    injected: list[dict[str, Any]] = Field(description="what went into the block")
    timings_ms: dict[str, float]
    model: str | None
    tokens: dict[str, int] = Field(description="the model's prompt and completion tokens")
    fallbacks: list[str]
    created_at: datetime


class TraceList(BaseModel):
    traces: list[Trace] = Field(description="newest first")


def _store(request: Request) -> TraceStore:
    store: TraceStore = runtime_of(request).extras["traces"]
    return store


def _answer(trace: RecallTrace) -> Trace:
    return Trace(**trace.__dict__)


@router.get("/v1/recall/traces/{trace_id}", response_model=Trace, responses=PROBLEMS)
async def get_trace(trace_id: Name, tenant: Tenant, request: Request) -> Trace:
    """What one recall did: its query, lane, candidates with scores, what it injected, outcome, timings and
    the model's tokens."""
    trace = await _store(request).get(tenant, trace_id)
    if trace is None:
        raise Problem(404, f"No recall trace {trace_id!r}: unknown, or older than the traces' retention.")
    return _answer(trace)


@router.get("/v1/recall/traces", response_model=TraceList)
async def list_traces(
    tenant: Tenant,
    request: Request,
    session_key: Annotated[Name, Query(min_length=1, max_length=512)],
    agent_id: Annotated[str | None, Query(pattern=r"^[A-Za-z0-9_-]{1,64}$")] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> TraceList:
    """A session's latest recall traces, newest first."""
    traces = await _store(request).recent(tenant, agent_id, session_key, limit)
    return TraceList(traces=[_answer(t) for t in traces])
