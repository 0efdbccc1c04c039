"""One recall run, in order: eligibility (`recall_scope`), the query (`recall_query`), the 15 s result cache,
lane 1 (trusted entries, no model), then lane 2 (the sub-agent, or its extractive stand-in without a model)
when the agent's mode and the message's intent call for it and the model's breaker is closed.

The route runs it as one task under `first_of`, so the run may be cancelled anywhere: what it learnt so far is
in its `Draft`, which becomes the trace.
"""

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import httpx
from pydantic import BaseModel, Field

from cairn.events.agents import ActiveMemory, ChatType
from cairn.llm import ModelError, Models, ModelUnavailable
from cairn.recall.files_queries import DocumentStore
from cairn.recall.history_queries import HistoryStore
from cairn.recall.memory_queries import MemoryReads
from cairn.recall.memory_search import MemorySearch
from cairn.recall.queries import ReadStore
from cairn.recall.recall_block import Cited, block, lane1_lines, source
from cairn.recall.recall_bounds import Breaker, ResultCache
from cairn.recall.recall_lanes import NO_MODEL, AgentRun, extractive, lane1, lane2
from cairn.recall.recall_query import RecallQuery, build_query, newest_turns
from cairn.recall.recall_reads import RecallReads, Setting
from cairn.recall.recall_scope import SessionFacts, active_memory_command, eligibility
from cairn.recall.recall_tools import MemoryTools, Reach
from cairn.recall.recall_traces import TraceStore
from cairn.text.recall_intent import seeks_memory

Outcome = Literal["injected", "none", "skipped", "timeout", "circuit_open"]


@dataclass(frozen=True)
class Asked:
    """What the runtime asked with (the request's fields)."""

    agent_id: str
    session_key: str
    text: str
    chat_type: ChatType | None
    consistent_with: str | None


class RecallItem(BaseModel):
    lane: int
    text: str
    source: str = Field(description="`path#Lx` of a memory entry, `model` or `extractive` for lane 2's sentence")
    score: float | None = None


@dataclass
class Answer:
    outcome: Outcome
    reason: str | None
    lane: Literal[1, 2] | None = None
    items: list[RecallItem] = field(default_factory=list)
    block: str | None = None
    cacheable: bool = True  # a finished run's answer; not a model's failure, which may pass


def cache_entry(answer: Answer) -> dict[str, Any]:
    """What the result cache keeps of an answer (read back by `_from_cache`)."""
    items = [i.model_dump() for i in answer.items]
    return {"outcome": answer.outcome, "reason": answer.reason, "lane": answer.lane, "block": answer.block,
            "items": items}  # fmt: skip


@dataclass
class Draft:
    """The trace as the run fills it in; a deadline may stop the run anywhere, and what it got so far is kept."""

    trace_id: str
    started: float
    query: str = ""
    candidates: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    fallbacks: list[str] = field(default_factory=list)
    model: str | None = None  # set once lane 2 asks a model: its breaker then learns how the call ended
    run: AgentRun = field(default_factory=AgentRun)
    cached: bool = False

    def lap(self, name: str, since: float) -> None:
        self.timings[name] = round((time.monotonic() - since) * 1000, 3)


@dataclass(frozen=True)
class Recaller:
    """Everything a recall uses, built once in the service's composition root."""

    reads: RecallReads
    memory_search: MemorySearch
    memory_reads: MemoryReads
    sessions: ReadStore
    documents: DocumentStore
    history: HistoryStore
    models: Models
    breaker: Breaker
    cache: ResultCache
    traces: TraceStore
    consistency_wait_s: float

    def tools(self, reach: Reach) -> MemoryTools:
        return MemoryTools(self.memory_search, self.sessions, self.documents, self.history, reach)


def _skip(setting: Setting, body: Asked) -> str | None:
    """Why this message gets no recall: a `/active-memory` command (its state is the reason) or ineligibility."""
    facts = setting.facts or SessionFacts.unstored(body.session_key, body.chat_type)
    command = active_memory_command(body.text)
    if command is not None:
        state = command if command != "status" else ("on" if facts.active_memory else "off")
        return f"/active-memory {command}: active memory is {state} for this session"
    return eligibility(facts, setting.config.active_memory, text=body.text)


def _lane1_answer(lines: list[str], strong: list[Cited]) -> Answer:
    items = [RecallItem(lane=1, text=c.snippet, source=source(c), score=c.score) for c in strong]
    return Answer("injected", None, 1, items[: len(lines)], block("\n".join(lines)))


def _from_cache(cached: dict[str, Any]) -> Answer:
    items = [RecallItem.model_validate(i) for i in cached["items"]]
    return Answer(cached["outcome"], cached["reason"], cached["lane"], items, cached["block"])


async def run(r: Recaller, tenant: str, body: Asked, setting: Setting, draft: Draft) -> Answer:
    config = setting.config.active_memory
    reason = _skip(setting, body)
    if reason is not None:
        return Answer("skipped", reason)
    if body.consistent_with is not None:
        await _wait_for(r, tenant, body.agent_id, int(body.consistent_with))
    turns = await newest_turns(r.history, tenant, body.agent_id, body.session_key, config.query_mode)
    query = build_query(config.query_mode, body.text, turns)
    draft.query = query.search_text
    cached = await r.cache.get(tenant, body.agent_id, body.session_key, draft.query)
    if cached is not None:
        draft.cached = True
        return _from_cache(cached)
    since = time.monotonic()
    first = await lane1(r.memory_search, tenant, body.agent_id, draft.query, config.min_score)
    draft.lap("lane1", since)
    draft.candidates += first.candidates
    draft.fallbacks += first.fallbacks
    lines = lane1_lines(first.strong)
    if lines:
        return _lane1_answer(lines, first.strong)
    gate = _lane2_gate(config, body.text)
    if gate is not None:
        return Answer("none", gate)
    since = time.monotonic()
    try:
        return await _lane2(r, tenant, body, setting, query, draft)
    finally:
        draft.lap("lane2", since)


async def _wait_for(r: Recaller, tenant: str, agent: str, position: int) -> None:
    """Read-your-writes, bounded once for both indexes: the messages (session search) and memory."""
    ends = time.monotonic() + r.consistency_wait_s
    await r.sessions.wait_for_index(tenant, agent, position, r.consistency_wait_s)
    await r.memory_reads.wait_for(tenant, agent, position, max(ends - time.monotonic(), 0.0))


def _lane2_gate(config: ActiveMemory, text: str) -> str | None:
    """Why lane 2 does not run after a weak lane 1, if it does not."""
    if config.mode == "off":
        return "nothing strong in trusted memory; lane 2 is off for this agent"
    if config.mode == "escalate" and not seeks_memory(text):
        return "nothing strong in trusted memory, and the message does not ask about something told before"
    return None


async def _lane2(r: Recaller, tenant: str, body: Asked, setting: Setting, query: RecallQuery, draft: Draft) -> Answer:
    client = await r.models.for_tenant(tenant)
    if client is not None and await r.breaker.is_open(tenant, body.agent_id, client.model):
        return Answer("circuit_open", f"lane 2 skipped: the breaker of model {client.model} is open after timeouts")
    keys = await r.reads.same_person(tenant, body.agent_id, body.session_key, setting.config)
    reach = Reach(tenant, body.agent_id, tuple(keys))
    tools = r.tools(reach)
    try:
        if client is None:
            return await _extractive(tools, query, draft)
        draft.model = client.model
        try:
            await lane2(client, tools, query, datetime.now(UTC).date().isoformat(), draft.run)
        except ModelError as error:
            await r.breaker.record(tenant, body.agent_id, client.model, timed_out=_timed_out(error))
            return Answer("none", f"lane 2's model failed: {error}", cacheable=False)
        await r.breaker.record(tenant, body.agent_id, client.model, timed_out=False)
    finally:
        draft.candidates += tools.candidates
    answer = draft.run.answer
    if answer is None:
        return Answer("none", draft.run.reason)
    return Answer("injected", None, 2, [RecallItem(lane=2, text=answer, source="model")], block(answer))


def _timed_out(error: ModelError) -> bool:
    """The model client's own time bound (shorter than the recall's deadline) counts as a timeout too."""
    return isinstance(error, ModelUnavailable) and isinstance(error.__cause__, TimeoutError | httpx.TimeoutException)


async def _extractive(tools: MemoryTools, query: RecallQuery, draft: Draft) -> Answer:
    draft.fallbacks.append(NO_MODEL)
    summary = extractive(await tools.search(query.search_text))
    if summary is None:
        return Answer("none", "no model configured, and the extractive fallback found nothing")
    item = RecallItem(lane=2, text=summary, source="extractive")
    return Answer("injected", "no model configured: an extractive summary of the best hits", 2, [item], block(summary))


def ended_early(outcome: Literal["timeout", "disconnected"], timeout_ms: int, *, reading: bool = False) -> Answer:
    """The answer of a recall cut short; `reading`: before the agent's settings were read (`timeout_ms` is then
    the agent's last known deadline)."""
    if outcome == "disconnected":
        return Answer("timeout", "the caller disconnected: recall was cancelled")
    if reading:
        return Answer("timeout", f"no answer within the deadline ({timeout_ms} ms): the agent's settings could not "
                                 "be read in time (the database is slow or away), so nothing is added")  # fmt: skip
    return Answer("timeout", f"no answer within the deadline ({timeout_ms} ms): nothing is added")
