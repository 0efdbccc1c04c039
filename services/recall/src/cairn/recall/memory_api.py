"""Memory search and index status (API.md, query side): `POST /v1/memory/search`, `GET /v1/memory/status`."""

import asyncio
import logging
from datetime import UTC, datetime
from typing import Annotated, Literal

import nats.errors
from fastapi import APIRouter, Query, Request
from nats.js import JetStreamContext
from pydantic import BaseModel, Field
from redis.asyncio import Redis
from redis.exceptions import RedisError

from cairn.delivery.dead_letters import count_dead_letters
from cairn.edge.auth import Tenant, key_of
from cairn.events.envelope import POSITION_PATTERN
from cairn.events.extraction import ExtractionFigures, agent_key
from cairn.events.fields import FreeText, Name
from cairn.llm import Models
from cairn.memindex import Embedder
from cairn.platform.runtime import runtime_of, settings_of
from cairn.recall.memory_queries import MemoryReads
from cairn.recall.memory_search import Hit, MemoryQuery, MemorySearch
from cairn.recall.recall_lanes import NO_MODEL
from cairn.recall.records_queries import RecordReads
from cairn.recall.session_meta import pending_flushes
from cairn.recall.settings import RecallSettings
from cairn.recall.visibility import Ceilings, Visibility, effective, seen

log = logging.getLogger(__name__)
router = APIRouter(tags=["memory"])
AgentId = Annotated[str, Query(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
# A search whose transcript hits are filtered afterwards asks for this many times the hits, at most MAX_ASKED.
OVERFETCH, MAX_ASKED = 4, 50
SOURCES = {"memory": ("memory",), "sessions": ("sessions",), "all": ("memory", "sessions")}


class MemorySearchRequest(BaseModel):
    agent_id: str = Field(default="main", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    query: FreeText = Field(min_length=1, max_length=4096)
    limit: int = Field(default=6, ge=1, le=50)
    min_score: float | None = Field(default=None, ge=0, le=1)
    corpus: Literal["memory", "sessions", "all"] = "memory"
    caller_session_key: Name | None = Field(
        default=None, max_length=512, description="the asking session: its own transcript is left out"
    )
    consistent_with: str | None = Field(
        default=None, pattern=POSITION_PATTERN, description="a write's position: wait (bounded) until it is searchable"
    )
    visibility: Visibility | None = Field(
        default=None,
        description="which transcripts `sessions` hits may come from, as in session search (`all` is the agent's: "
        "memory is per agent); the agent's `sessions_visibility` is the most a request may see; null: that ceiling",
    )


class MemoryHit(BaseModel):
    path: str = Field(description="the document's path, or `sessions/<session key>` for a transcript hit")
    start_line: int = Field(description="first line of the chunk (for a transcript: position of its first entry)")
    end_line: int
    score: float = Field(description="fused relevance in [0, 1], after time decay")
    snippet: str = Field(description="at most 700 characters, redacted")
    source: Literal["memory", "sessions"]
    citation: str = Field(description="a query-API URL that opens the chunk's lines or the session's history")
    message_ids: list[str] = Field(
        description="transcript messages the chunk was cut from, most relevant first, as written (the adapter's id, "
        "else cairn's); empty for documents"
    )
    cairn_message_ids: list[str] = Field(default_factory=list, description="the same messages by cairn's ids")
    message_scores: list[float] = Field(
        default_factory=list,
        description="each message's own relevance in [0, 1], in the order of `message_ids`: comparable across the "
        "hits of one search, so messages can be ranked across hits",
    )
    session_key: str | None = None
    session_id: str | None = None
    occurred_at: datetime | None = None


class MemorySearchResponse(BaseModel):
    results: list[MemoryHit]
    fallbacks: list[str] = Field(description="degraded modes used for this search, e.g. lexical only")
    indexing: bool = Field(default=False, description="`consistent_with` was not reached within the bound")


class IndexCounts(BaseModel):
    documents: int
    chunks: int
    memory_chunks: int
    session_chunks: int
    chunks_without_current_vector: int
    messages_without_current_vector: int = Field(
        description="remembered messages whose own vector is not yet of the configured model"
    )


class PendingWork(BaseModel):
    sessions: int = Field(description="remembered sessions with turns waiting for their debounce")
    documents: int = Field(description="documents whose current version is not chunked yet")
    reembed: int = Field(description="chunks and remembered messages waiting for a vector of the configured model")
    flushes: int = Field(
        default=0, description="pre-compaction memory flushes due and not done (waiting for the model, or retried)"
    )
    record_judgements: int = Field(
        default=0, description="memory records close to another (cosine 0.7-0.92) kept as new until a model judges them"
    )


class ExtractionStatus(BaseModel):
    """Model-based extraction after turns (consolidation), as its Redis figures say; losing them loses figures only."""

    pending_turns: int = Field(description="turns waiting for their batch (debounce, the hourly cap, the model down)")
    turns_without_model: int = Field(description="turns no model could read: none is configured for the tenant")
    turns: int = Field(description="turns a model has read")
    model_calls: int
    prompt_tokens: int
    completion_tokens: int
    bad_replies: int = Field(description="answers nothing could be read from (nothing extracted from their batch)")
    candidates: int = Field(description="fact candidates handed to the record store")
    capped: int = Field(description="batches deferred by the per-session hourly cap")
    retries: int = Field(description="batches put back because the model could not be reached")


class MemoryStatus(BaseModel):
    backend: str
    provider: str
    model: str | None
    dimensions: int | None
    documents: int
    chunks: int
    records: int = Field(default=0, description="the agent's current memory records (GET /v1/memory/records)")
    counts: IndexCounts
    pending: PendingWork
    index_lag_s: float = Field(description="age of the oldest change not yet searchable (0 when none)")
    last_indexed_at: datetime | None
    dead_letters: dict[str, int] | None = Field(
        description="the tenant's dead letters per consumer (consumers without any left out; all agents): events it "
        "sent that were not applied (`cairn dead-letters list --tenant`); null when they could not be counted now"
    )
    extraction: ExtractionStatus | None = Field(
        default=None, description="model-based extraction; null when its figures could not be read now"
    )
    fallbacks: list[str]


def _search(request: Request) -> MemorySearch:
    search: MemorySearch = runtime_of(request).extras["memory_search"]
    return search


def _to_hit(hit: Hit) -> MemoryHit:
    d = hit.detail
    return MemoryHit(
        path=d.path if d.source == "memory" and d.path else f"sessions/{d.session_key}",
        start_line=d.start_line,
        end_line=d.end_line,
        score=hit.score,
        snippet=hit.snippet,
        source="memory" if d.source == "memory" else "sessions",
        citation=hit.citation,
        message_ids=[
            (d.external_ids[i] if i < len(d.external_ids) and d.external_ids[i] else m)
            for i, m in enumerate(d.message_ids)
        ],
        cairn_message_ids=d.message_ids,
        message_scores=hit.message_scores,
        session_key=d.session_key,
        session_id=d.session_id,
        occurred_at=d.occurred_at,
    )


@router.post("/v1/memory/search", response_model=MemorySearchResponse)
async def search_memory(body: MemorySearchRequest, tenant: Tenant, request: Request) -> MemorySearchResponse:
    """Find memory by meaning and by exact words: documents, remembered conversations, or both."""
    indexing = False
    if body.consistent_with is not None:
        reads: MemoryReads = runtime_of(request).extras["memory_reads"]
        bound = settings_of(request, RecallSettings).consistency_wait_s
        indexing = not await reads.wait_for(tenant, body.agent_id, int(body.consistent_with), bound)
    sources, sessions = await _sessions_seen(request, tenant, body)
    if not sources:
        return MemorySearchResponse(results=[], fallbacks=[], indexing=indexing)
    asked = body.limit if sessions is None else min(MAX_ASKED, body.limit * OVERFETCH)
    query = MemoryQuery(body.agent_id, body.query, asked, body.min_score, sources, body.caller_session_key)
    found = await _search(request).search(tenant, query)
    kept = [
        h for h in found.hits if sessions is None or h.detail.source == "memory" or h.detail.session_key in sessions
    ]
    hits = [_to_hit(h) for h in kept[: body.limit]]
    return MemorySearchResponse(results=hits, fallbacks=found.fallbacks, indexing=indexing)


async def _sessions_seen(
    request: Request, tenant: str, body: MemorySearchRequest
) -> tuple[tuple[str, ...], set[str] | None]:
    """The sources to search and the transcripts hits may come from (None: every one of the agent's). With no
    transcript in sight, transcripts are not searched at all; with some, hits of others are dropped after the
    search, which asks for more hits to make up for them."""
    sources = SOURCES[body.corpus]
    if "sessions" not in sources:
        return sources, None
    ceilings: Ceilings = runtime_of(request).extras["ceilings"]
    visibility = effective(await ceilings.of(tenant, body.agent_id), body.visibility, key_of(request))
    sight = await seen(runtime_of(request).extras["reads"], tenant, body.agent_id, body.caller_session_key, visibility)
    if sight.scope.session_keys is None:
        return sources, None
    visible = set(sight.scope.session_keys) - {body.caller_session_key}
    if not visible:
        return tuple(s for s in sources if s != "sessions"), None
    return sources, visible


@router.get("/v1/memory/status", response_model=MemoryStatus)
async def memory_status(tenant: Tenant, request: Request, agent_id: AgentId = "main") -> MemoryStatus:
    """What the memory index holds for an agent, what it is still working on, and how it degrades."""
    embedder: Embedder = runtime_of(request).extras["embedder"]
    reads: MemoryReads = runtime_of(request).extras["memory_reads"]
    raw = await reads.status(tenant, agent_id, embedder.model)
    chunks, pending, documents = raw["chunks"], raw["pending"], raw["documents"]
    stale_chunks = int(chunks["without_vector"]) if embedder.model else 0
    stale_messages = int(raw["turns"]["without_vector"]) if embedder.model else 0
    counts = IndexCounts(
        documents=chunks["documents"],
        chunks=chunks["memory_chunks"] + chunks["session_chunks"],
        memory_chunks=chunks["memory_chunks"],
        session_chunks=chunks["session_chunks"],
        chunks_without_current_vector=stale_chunks,
        messages_without_current_vector=stale_messages,
    )
    dead = await _dead_letters(runtime_of(request).publisher.js, tenant, settings_of(request, RecallSettings))
    models: Models = runtime_of(request).extras["models"]
    no_model = [] if await models.for_tenant(tenant) is not None else [NO_MODEL]
    extraction = await _extraction(runtime_of(request).redis, tenant, agent_id)
    records: RecordReads = runtime_of(request).extras["records"]
    current_records, judgements = await records.counts(tenant, agent_id)
    now = datetime.now(UTC)
    oldest = [t for t in (pending["oldest"], documents["oldest"]) if t is not None]
    return MemoryStatus(
        backend="postgres (pgvector hnsw, cosine) + tsvector",
        provider=embedder.provider,
        model=embedder.model,
        dimensions=embedder.dimensions,
        documents=counts.documents,
        chunks=counts.chunks,
        records=current_records,
        counts=counts,
        pending=PendingWork(
            sessions=pending["sessions"],
            documents=documents["documents"],
            reembed=stale_chunks + stale_messages,
            flushes=await pending_flushes(runtime_of(request).pool, tenant, agent_id),
            record_judgements=judgements,
        ),
        index_lag_s=round(max(((now - t).total_seconds() for t in oldest), default=0.0), 3),
        last_indexed_at=chunks["last_indexed_at"],
        dead_letters=dead,
        extraction=extraction,
        fallbacks=_fallbacks(embedder, stale_chunks, stale_messages)
        + ([] if dead is not None else [DEAD_UNKNOWN])
        + no_model
        + _extraction_fallbacks(extraction, bool(no_model))
        + ([f"{judgements} memory records wait for a model to judge them (kept as new)"] if judgements else []),
    )


async def _extraction(redis: "Redis", tenant: str, agent_id: str) -> ExtractionStatus | None:
    try:
        async with asyncio.timeout(1.0):
            figures = ExtractionFigures.of(await redis.hgetall(agent_key(tenant, agent_id)))
    except (TimeoutError, RedisError, OSError) as error:
        log.warning("memory status without extraction figures: %s", type(error).__name__)
        return None
    return ExtractionStatus(
        pending_turns=figures.pending, turns_without_model=figures.no_model, turns=figures.turns,
        model_calls=figures.calls, prompt_tokens=figures.prompt_tokens, completion_tokens=figures.completion_tokens,
        bad_replies=figures.bad_replies, candidates=figures.candidates, capped=figures.capped, retries=figures.retries,
    )  # fmt: skip


def _extraction_fallbacks(extraction: ExtractionStatus | None, no_model: bool) -> list[str]:
    """Said whenever turns were or are left unread by a model, never hidden behind a count."""
    if extraction is None:
        return ["extraction figures unknown: Redis did not answer in time (extraction is null)"]
    if not no_model or not (extraction.pending_turns or extraction.turns_without_model):
        return []
    waiting = extraction.pending_turns + extraction.turns_without_model
    return [
        f"extraction pending: {waiting} turns were not read by a model (none is configured); only explicit "
        "statements are extracted, by rule"
    ]


DEAD_UNKNOWN = "dead letters unknown: NATS did not answer in time (dead_letters is null)"


async def _dead_letters(js: JetStreamContext, tenant: str, settings: RecallSettings) -> dict[str, int] | None:
    """The tenant's dead-letter counts, or None when NATS does not answer within the bound: a status page answers
    quickly with what it knows rather than waiting for, or failing with, the log."""
    try:
        async with asyncio.timeout(settings.dead_letters_wait_s):
            return await count_dead_letters(js, tenant)
    except (TimeoutError, nats.errors.Error, OSError) as error:
        log.warning("memory status without dead-letter counts: %s", type(error).__name__)
        return None


def _fallbacks(embedder: Embedder, stale_chunks: int, stale_messages: int) -> list[str]:
    if embedder.model is None:
        return ["lexical only: no embedding provider is configured (CAIRN_EMBEDDING_PROVIDER=none)"]
    found = []
    if stale_chunks:
        found.append(
            f"re-embedding: {stale_chunks} chunks are found by their words only until they have a {embedder.model} "
            "vector"
        )
    if stale_messages:
        found.append(
            f"re-embedding: {stale_messages} remembered messages are ranked without their own meaning until they "
            f"have a {embedder.model} vector"
        )
    return found
