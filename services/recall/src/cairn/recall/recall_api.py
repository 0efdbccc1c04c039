"""`POST /v1/recall` (API.md, DESIGN §5 "Recall"): before the agent replies to a user message, at most one
small block of remembered context, or nothing, within a hard deadline.

The deadline runs from the route's start and covers everything: the read of the agent's settings (bounded by the
agent's last known deadline, as its config is not read yet), then the run (`recall_run`) with what is left of the
agent's own. Each is a task under `first_of`: at the deadline or when the caller hangs up it is cancelled, the
model call first, and the answer says `timeout`. A database that fails fails open: nothing is added. The trace
is stored after the answer is sent.
"""

import logging
import time
import uuid
from datetime import UTC, datetime
from typing import Literal

from fastapi import APIRouter, BackgroundTasks, Request
from pydantic import BaseModel, Field

from cairn.edge.auth import Tenant
from cairn.events.agents import ChatType
from cairn.events.envelope import POSITION_PATTERN
from cairn.events.fields import FreeText, Name
from cairn.platform.runtime import runtime_of
from cairn.recall.recall_bounds import first_of
from cairn.recall.recall_reads import DATABASE_FAILURES
from cairn.recall.recall_run import Answer, Asked, Draft, Outcome, Recaller, RecallItem, cache_entry, ended_early, run
from cairn.recall.recall_traces import RecallTrace

log = logging.getLogger(__name__)
router = APIRouter(tags=["recall"])
MAX_TEXT_CHARS = 64 * 1024  # a pasted document is still a message to answer: recall reads its beginning


class RecallRequest(BaseModel):
    agent_id: str = Field(default="main", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    session_key: Name = Field(min_length=1, max_length=512, description="the session the message arrived in")
    text: FreeText = Field(
        min_length=1,
        max_length=MAX_TEXT_CHARS,
        description="the user's message (searched by its first 2,000 characters)",
    )
    chat_type: ChatType | None = Field(
        default=None, description="the chat's type, for a session not stored yet (a stored session's own wins)"
    )
    consistent_with: str | None = Field(
        default=None, pattern=POSITION_PATTERN, description="a write's position: wait (bounded) until it is searchable"
    )


class RecallAnswer(BaseModel):
    outcome: Outcome
    reason: str | None
    block: str | None = Field(description="put in front of the user's message as is; null: nothing to add")
    lane: Literal[1, 2] | None
    items: list[RecallItem]
    trace_id: str = Field(description="`GET /v1/recall/traces/{trace_id}` shows how this answer came about")
    elapsed_ms: float
    fallbacks: list[str] = Field(default_factory=list, description="degraded modes used, e.g. no model")


def _asked(body: RecallRequest) -> Asked:
    return Asked(body.agent_id, body.session_key, body.text, body.chat_type, body.consistent_with)


def _recaller(request: Request) -> Recaller:
    recaller: Recaller = runtime_of(request).extras["recaller"]
    return recaller


@router.post("/v1/recall", response_model=RecallAnswer)
async def recall(body: RecallRequest, tenant: Tenant, request: Request, background: BackgroundTasks) -> RecallAnswer:
    """Remembered context for the reply to this message: a block to put in front of it, or nothing, in time."""
    draft = Draft(str(uuid.uuid4()), time.monotonic())
    r = _recaller(request)
    try:
        answer = await _answer(r, tenant, body, request, draft)
    except DATABASE_FAILURES as error:
        log.warning("recall answered nothing: the database failed (%s)", str(error) or type(error).__name__)
        answer = Answer("none", "recall could not read memory (the database is away): nothing is added",
                        cacheable=False)  # fmt: skip
    draft.lap("total", draft.started)
    background.add_task(_afterwards, r, tenant, body, draft, answer)
    return RecallAnswer(
        outcome=answer.outcome, reason=answer.reason, block=answer.block, lane=answer.lane, items=answer.items,
        trace_id=draft.trace_id, elapsed_ms=draft.timings["total"], fallbacks=draft.fallbacks,
    )  # fmt: skip


async def _answer(r: Recaller, tenant: str, body: RecallRequest, request: Request, draft: Draft) -> Answer:
    known_ms = r.reads.deadline_ms(tenant, body.agent_id)
    setting = await first_of(r.reads.setting(tenant, body.agent_id, body.session_key), deadline_s=known_ms / 1000,
                             request=request)  # fmt: skip
    draft.lap("setting", draft.started)
    if isinstance(setting, str):
        return ended_early(setting, known_ms, reading=True)
    config = setting.config.active_memory
    deadline_s = config.timeout_ms / 1000 - (time.monotonic() - draft.started)
    done = await first_of(run(r, tenant, _asked(body), setting, draft), deadline_s=deadline_s, request=request,
                          first=draft.run.stop)  # fmt: skip
    answer = ended_early(done, config.timeout_ms) if isinstance(done, str) else done
    if done == "timeout" and draft.model is not None and draft.run.in_flight:
        await r.breaker.record(tenant, body.agent_id, draft.model, timed_out=True)
    if answer.cacheable and answer.outcome in ("injected", "none") and not draft.cached:
        await r.cache.put(tenant, body.agent_id, body.session_key, draft.query, cache_entry(answer))
    return answer


async def _afterwards(r: Recaller, tenant: str, body: RecallRequest, draft: Draft, answer: Answer) -> None:
    """After the answer is sent: the trace, then the token accounting (a call cut off or failed counts as failed)."""
    await r.traces.save(tenant, _trace(body, draft, answer))
    for call in draft.run.calls:
        await r.models.record_usage(tenant, "recall", call)
    if draft.run.in_flight:
        await r.models.record_usage(tenant, "recall", None, failed=True, model=draft.model)


def _trace(body: RecallRequest, draft: Draft, answer: Answer) -> RecallTrace:
    calls = draft.run.calls
    return RecallTrace(
        trace_id=draft.trace_id, agent_id=body.agent_id, session_key=body.session_key, query=draft.query,
        lane=answer.lane, outcome=answer.outcome, reason=answer.reason, candidates=draft.candidates,
        injected=[i.model_dump() for i in answer.items], timings_ms=draft.timings, model=draft.model,
        tokens={"prompt": sum(c.usage.prompt_tokens for c in calls),
                "completion": sum(c.usage.completion_tokens for c in calls)},
        fallbacks=draft.fallbacks, created_at=datetime.now(UTC),
    )  # fmt: skip
