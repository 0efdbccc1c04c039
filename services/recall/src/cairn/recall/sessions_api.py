"""Session history and listing (API.md, query side): routes only; the rules live in `history`."""

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import BaseModel

from cairn.edge.auth import Tenant, key_of
from cairn.edge.problems import Problem
from cairn.events.envelope import POSITION_PATTERN
from cairn.events.fields import EventTime, Name
from cairn.events.routing import is_incognito
from cairn.platform.runtime import runtime_of, settings_of
from cairn.recall.history import (
    BadCursor,
    Cursor,
    HistoryPage,
    HistoryWindow,
    PageRequest,
    build_page,
    choose_window,
    decode_cursor,
    encode_cursor,
    roles_shown,
)
from cairn.recall.history_queries import HistoryStore, Reads, SessionFilter, SessionHead
from cairn.recall.incognito_reads import IncognitoReads, read_thread
from cairn.recall.queries import ReadStore
from cairn.recall.session_meta import SessionMeta, session_meta
from cairn.recall.settings import RecallSettings
from cairn.recall.visibility import Ceilings, Visibility, effective, seen

router = APIRouter(tags=["sessions"])
AgentId = Annotated[str, Query(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
SessionKey = Annotated[Name, Path(min_length=1, max_length=512)]
ConsistentWith = Annotated[
    str | None,
    Query(
        pattern=POSITION_PATTERN,
        description="a write's position: wait (bounded) until the projections include it, else answer with "
        "what is stored and `indexing: true`",
    ),
]
_PROBLEM_JSON: dict[str, Any] = {"application/problem+json": {}}
PROBLEMS: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such session (or message) for this tenant", "content": _PROBLEM_JSON},
    422: {"description": "A query parameter is invalid; `errors` names it", "content": _PROBLEM_JSON},
}


class SessionSummary(BaseModel):
    session_key: str
    session_id: str
    chat_type: str
    channel: str
    status: str
    message_count: int
    window_tokens: int
    compaction_count: int
    parent_session_id: str | None
    created_at: datetime
    updated_at: datetime


class SessionList(BaseModel):
    sessions: list[SessionSummary]
    next_cursor: str | None
    indexing: bool = False


def _store(request: Request) -> HistoryStore:
    store: HistoryStore = runtime_of(request).extras["history"]
    return store


def _settings(request: Request) -> RecallSettings:
    return settings_of(request, RecallSettings)


async def _caught_up(request: Request, tenant: str, agent: str, position: str | None) -> bool:
    """False when `consistent_with` was given and not reached within the bound. The indexer applies what
    the session service appended (messages, resets, new threads, forks), so once it has reached a position,
    transcripts and the session list hold it too."""
    if position is None:
        return True
    reads: ReadStore = runtime_of(request).extras["reads"]
    return await reads.wait_for_index(tenant, agent, int(position), _settings(request).consistency_wait_s)


@asynccontextmanager
async def _reader(request: Request, tenant: str, agent: str, key: str) -> AsyncIterator[Reads]:
    """Incognito threads are read from memory (never from Postgres, where they never are)."""
    if is_incognito(key):
        yield IncognitoReads(await read_thread(runtime_of(request).redis, tenant, agent, key))
        return
    async with _store(request).reader(tenant) as reads:
        yield reads


async def _within_sight(
    request: Request, tenant: str, agent: str, key: str, caller: str | None, asked: Visibility | None
) -> None:
    ceilings: Ceilings = runtime_of(request).extras["ceilings"]
    visibility = effective(await ceilings.of(tenant, agent), asked, key_of(request))
    sight = await seen(runtime_of(request).extras["reads"], tenant, agent, caller, visibility)
    if not sight.admits(agent, key):
        raise Problem(403, f"Session {key!r} is outside what {sight.caller!r} may see (visibility {visibility}).")


async def _open_session(reads: Reads, agent_id: str, key: str, session_id: uuid.UUID | None) -> SessionHead:
    """Another tenant's key is as unknown as a key never used: 404 either way, never a 403."""
    session = await reads.session(agent_id, key)
    if session is None:
        raise Problem(404, f"No session {key!r} for agent {agent_id!r}.")
    if session_id is None or str(session_id) == session.session_id:
        return session
    earlier = await reads.earlier_session(agent_id, key, session_id)  # before a daily or idle reset
    if earlier is None:
        raise Problem(404, f"Session {key!r} of agent {agent_id!r} never had the id {session_id}.")
    return earlier


@router.get(
    "/v1/sessions/{session_key:path}/history",
    response_model=HistoryPage,
    responses={**PROBLEMS, 403: {"description": "The session is outside what the caller may see (visibility)"}},
)
async def history(
    session_key: SessionKey,
    tenant: Tenant,
    request: Request,
    agent_id: AgentId = "main",
    session_id: uuid.UUID | None = None,
    message_id: Annotated[Name | None, Query(min_length=1, max_length=256)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    include_tools: bool = False,
    consistent_with: ConsistentWith = None,
    caller_session_key: Annotated[Name | None, Query(min_length=1, max_length=512)] = None,
    visibility: Visibility | None = None,
) -> Response:
    """A session's messages, newest page first: the latest window, or the closed window of `message_id`.

    Redacted, at most 4000 characters per text and 80 KB per response; page back with `next_offset`. A session
    outside what the caller may see (`visibility` under the agent's `sessions_visibility`, as in session
    search) is refused with 403.
    """
    await _within_sight(request, tenant, agent_id, session_key, caller_session_key, visibility)
    roles = roles_shown(include_tools)
    # an incognito thread is held in memory as soon as it is written: there is nothing to wait for
    caught_up = is_incognito(session_key) or await _caught_up(request, tenant, agent_id, consistent_with)
    async with _reader(request, tenant, agent_id, session_key) as reads:
        session = await _open_session(reads, agent_id, session_key, session_id)
        anchor = await reads.anchor_window(session.session_id, message_id) if message_id else None
        if message_id and anchor is None:
            raise Problem(404, f"No message {message_id!r} in session {session_key!r}.")
        window = choose_window(session.reset_index, anchor)
        rows = await reads.newest_messages(session.session_id, window, roles, limit + 1, offset)
        earlier = await reads.has_earlier_windows(session.session_id, window, roles)
    settings = _settings(request)
    page = PageRequest(
        session_key, session.session_id, HistoryWindow(reset_index=window, has_earlier_windows=earlier),
        limit, offset, settings.history_max_bytes, settings.history_text_chars, indexing=not caught_up,
    )  # fmt: skip
    _, body = build_page(page, rows)
    return Response(body, media_type="application/json")


def _cursor(token: str | None) -> Cursor | None:
    try:
        return decode_cursor(token) if token else None
    except BadCursor as error:
        raise Problem(422, f"The cursor is invalid: {error}.", [{"field": "cursor", "message": str(error)}]) from error


@router.get("/v1/sessions", response_model=SessionList, responses=PROBLEMS)
async def list_sessions(
    tenant: Tenant,
    request: Request,
    agent_id: AgentId = "main",
    chat_type: Literal["direct", "group", "channel"] | None = None,
    status: Literal["active", "dormant", "archived"] | None = None,
    updated_since: EventTime | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[Name | None, Query(max_length=2048)] = None,
    consistent_with: ConsistentWith = None,
) -> SessionList:
    """An agent's sessions, most recently updated first, with cursor paging."""
    caught_up = await _caught_up(request, tenant, agent_id, consistent_with)
    where = SessionFilter(agent_id, chat_type, status, updated_since, _cursor(cursor))
    rows = await _store(request).sessions(tenant, where, limit + 1)
    sessions = [SessionSummary(**row) for row in rows[:limit]]
    last = sessions[-1] if len(rows) > limit else None
    next_cursor = encode_cursor(Cursor(last.updated_at, last.session_key)) if last else None
    return SessionList(sessions=sessions, next_cursor=next_cursor, indexing=not caught_up)


# Registered after the history route: `{session_key:path}` would otherwise take ".../history" as a key.
@router.get("/v1/sessions/{session_key:path}", response_model=SessionMeta, responses=PROBLEMS)
async def session_metadata(
    session_key: SessionKey, tenant: Tenant, request: Request, agent_id: AgentId = "main"
) -> SessionMeta:
    """A session's metadata: id, status, window and reset index, token estimate, compactions, and its
    pre-compaction memory flush (`memory_flush`: the last cycle flushed, when, failures, what is pending and why)."""
    if is_incognito(session_key):  # held in memory only: no stored session, no flush
        raise Problem(404, f"Incognito thread {session_key!r} keeps no session metadata.")
    meta = await session_meta(runtime_of(request).pool, tenant, agent_id, session_key)
    if meta is None:
        raise Problem(404, f"No session {session_key!r} for agent {agent_id!r}.")
    return meta
