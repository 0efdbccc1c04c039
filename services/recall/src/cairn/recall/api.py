"""The query API: session search (API.md, query side)."""

import json
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from cairn.edge.auth import Tenant, key_of
from cairn.events.envelope import POSITION_PATTERN
from cairn.events.fields import FreeText, Name
from cairn.platform.runtime import runtime_of, settings_of
from cairn.recall.queries import MessageHit, Page, ReadStore, Scope
from cairn.recall.settings import RecallSettings
from cairn.recall.visibility import Ceilings, Visibility, effective, seen
from cairn.text import SearchQuery, build_query, snippet, without_phrases

router = APIRouter()
AgentId = Annotated[str, Query(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
SNIPPET_CHARS = 300
MAX_OFFSET = 475  # with limit 25, the first 500 hits can be paged through


class SessionSearch(BaseModel):
    agent_id: str = Field(default="main", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    query: FreeText = Field(min_length=1, max_length=4096)
    limit: int = Field(default=10, ge=1, le=25)
    offset: int = Field(
        default=0, ge=0, le=MAX_OFFSET, description="hits to skip, for a next page (the order is stable)"
    )
    caller_session_key: Name | None = Field(default=None, max_length=512)
    visibility: Visibility | None = Field(
        default=None,
        description="self: the caller's session; tree: it and the sessions forked or spawned from it (all of the "
        "agent's when the caller is its main session, or none is given); agent: every session of the agent; all: "
        "every agent's. The agent's `sessions_visibility` is the most a request may see: a wider value is narrowed "
        "to it; null: that ceiling",
    )
    consistent_with: str | None = Field(default=None, pattern=POSITION_PATTERN)


class SessionHit(BaseModel):
    session_key: str
    session_id: str
    message_id: str = Field(description="the id the message was written with (API.md): the adapter's, else cairn's")
    cairn_message_id: str = Field(description="cairn's id of the message, unique in the tenant")
    external_id: str | None = Field(description="the adapter's message id, when it sent one")
    role: str
    occurred_at: datetime
    snippet: str
    score: float = Field(description="relevance: 1 + s for a message with every term, s otherwise; 0 ≤ s < 1")


class SessionSearchResult(BaseModel):
    results: list[SessionHit]
    truncated: bool
    indexing: bool


# What `_within_budget` counts: the envelope ({"results": [], "truncated": false, "indexing": false} and then
# some), and for its bound of a hit the frame of keys, separators, quotes and newline, and the longest JSON form
# of each value that is not a string (a float's repr, -1.2345678901234567e-308; null; an ISO date with its offset,
# 2026-11-03T12:00:01.123456+05:30:15); any other type is out of the bound, and its page is measured hit by hit.
_BASE = 64
_FRAME = len(json.dumps(dict.fromkeys(SessionHit.model_fields, ""))) + 1
_LONGEST: dict[type[object], int] = {float: 24, type(None): 4, datetime: 40}
_UNBOUNDED = 1 << 30


def _store(request: Request) -> ReadStore:
    store: ReadStore = runtime_of(request).extras["reads"]
    return store


def _settings(request: Request) -> RecallSettings:
    return settings_of(request, RecallSettings)


def _within_budget(hits: list[SessionHit], budget: int) -> tuple[list[SessionHit], bool]:
    """Keep the best hits whose JSON fits the byte budget (visibility was applied before). A page whose bound
    fits is kept whole without encoding each hit to count its bytes (~10 µs a hit, the handler's costliest step of
    its own): pages nearly always fit several times over."""
    if _page_bound(hits) <= budget:
        return hits, False
    kept: list[SessionHit] = []
    used = _BASE
    for hit in hits:
        size = _encoded_size(hit)
        if used + size > budget:
            return kept, True
        kept.append(hit)
        used += size
    return kept, False


def _encoded_size(hit: SessionHit) -> int:
    """The bytes a hit counts against the budget: its JSON with json's default separators, and a newline."""
    return len(json.dumps(hit.model_dump(mode="json"), ensure_ascii=False).encode()) + 1


def _page_bound(hits: list[SessionHit]) -> int:
    """At least what the hits count against the budget together (`_BASE` and each one's `_encoded_size`): their
    strings escaped and encoded exactly, at once (escaping is character by character, so the strings of a page
    may be escaped as one), each hit's frame, and the longest form of every value that is not a string."""
    texts: list[str] = []
    size = _BASE + len(hits) * _FRAME
    for hit in hits:
        for value in hit.__dict__.values():
            if isinstance(value, str):
                texts.append(value)
            else:
                size += _LONGEST.get(type(value), _UNBOUNDED)
    return size + len(json.dumps("".join(texts), ensure_ascii=False).encode()) - 2  # not the quotes of the join


async def _any_hit(store: ReadStore, tenant: str, scope: Scope, query: SearchQuery) -> bool:
    return bool(await store.search_messages(tenant, scope, query, Page(1, 0, 1)))


async def _ranked(
    store: ReadStore, tenant: str, scope: Scope, text: str, query: SearchQuery, page: Page
) -> tuple[SearchQuery, list[MessageHit]]:
    """The page's hits and the query they answer: quoted phrases that match nothing anywhere fall back to
    their words (every page alike). An empty first page already says that nothing matches (its candidates
    are every match up to the cap, at least one if there is one), so only a later page asks again."""
    rows = await store.search_messages(tenant, scope, query, page)
    if rows:
        return query, rows
    relaxed = build_query(without_phrases(text))
    if relaxed is None or relaxed == query or (page.offset > 0 and await _any_hit(store, tenant, scope, query)):
        return query, rows
    return relaxed, await store.search_messages(tenant, scope, relaxed, page)


async def _scope(request: Request, tenant: str, body: SessionSearch) -> Scope:
    """What the caller may see: the request's visibility under the agent's ceiling (`cairn.recall.visibility`)."""
    ceilings: Ceilings = runtime_of(request).extras["ceilings"]
    visibility = effective(await ceilings.of(tenant, body.agent_id), body.visibility, key_of(request))
    return (await seen(_store(request), tenant, body.agent_id, body.caller_session_key, visibility)).scope


@router.post("/v1/sessions/search", response_model=SessionSearchResult, tags=["sessions"])
async def search_sessions(body: SessionSearch, tenant: Tenant, request: Request) -> SessionSearchResult:
    """Find user and assistant messages again, word for word (Chinese, Japanese, Korean included).

    Messages with every term rank first, then by relevance (BM25), then the most recent; `"quoted
    phrases"` must match in order, and when they match nothing at all their words are searched instead.
    """
    store, settings = _store(request), _settings(request)
    indexing = False
    if body.consistent_with is not None:
        indexing = not await store.wait_for_index(
            tenant, body.agent_id, int(body.consistent_with), settings.consistency_wait_s
        )
    query = build_query(body.query)
    if query is None:
        return SessionSearchResult(results=[], truncated=False, indexing=indexing)
    scope = await _scope(request, tenant, body)
    page = Page(body.limit, body.offset, settings.search_candidates)
    query, rows = await _ranked(store, tenant, scope, body.query, query, page)
    hits = [
        SessionHit(
            session_key=r.session_key,
            session_id=r.session_id,
            message_id=r.external_id or r.message_id,
            cairn_message_id=r.message_id,
            external_id=r.external_id,
            role=r.role,
            occurred_at=r.occurred_at,
            snippet=snippet(r.text, query.terms, SNIPPET_CHARS),
            score=round(r.score, 6),
        )
        for r in rows
    ]
    kept, truncated = _within_budget(hits, settings.max_response_bytes)
    return SessionSearchResult(results=kept, truncated=truncated, indexing=indexing)
