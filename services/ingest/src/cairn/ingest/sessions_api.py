"""Session commands: console threads, forks and resets (API.md, command side).

The session service applies them. Ingest chooses a new session's key and id, so it can answer 201 at
once, and checks that a parent (and a fork's message) exists, since the session service cannot answer
HTTP: an unknown key, another tenant's included, is a 404.

Incognito threads never reach the session service: ingest creates and resets them in the in-memory
thread store itself (see `incognito.py`).
"""

import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, Field

from cairn.edge.auth import Tenant
from cairn.edge.problems import Problem
from cairn.events import SessionCommand
from cairn.events.envelope import TOKEN_PATTERN
from cairn.events.fields import Name
from cairn.events.models import ChatType
from cairn.events.routing import incognito_thread_key, is_incognito
from cairn.ingest import incognito
from cairn.ingest.domain import SESSION_KEY_PATTERN, console_thread_key
from cairn.ingest.incognito_store import IncognitoThreads
from cairn.ingest.sessions import KnownSession, SessionDirectory
from cairn.platform.runtime import runtime_of

router = APIRouter(tags=["sessions"])
SessionKey = Annotated[Name, Path(pattern=SESSION_KEY_PATTERN, description="at most 512 characters, no whitespace")]
AgentId = Annotated[str, Field(pattern=TOKEN_PATTERN)]
# A fork would copy a thread's window into a persisted session, or persisted history into memory only.
INCOGNITO_NO_FORK = "incognito threads cannot be forked, nor start as a fork"


class NewSession(BaseModel):
    agent_id: AgentId = "main"
    incognito: bool = False
    parent_session_key: Name | None = Field(default=None, pattern=SESSION_KEY_PATTERN)
    fork: bool = Field(default=False, description="start with the parent's current window (needs the parent)")


class ForkRequest(BaseModel):
    agent_id: AgentId = "main"
    from_message_id: Name | None = Field(
        default=None, min_length=1, max_length=256, description="copy up to this message (ours or the adapter's id)"
    )


class CreatedSession(BaseModel):
    session_key: str
    session_id: str
    position: str = Field(
        description='the command\'s position: pass it as consistent_with to a search ("0" for an incognito '
        "thread, which is never indexed)"
    )


class ResetRequest(BaseModel):
    agent_id: AgentId = "main"
    reason: Literal["new", "reset", "api"] = "api"


class ResetAccepted(BaseModel):
    position: str


def _invalid(field: str, message: str) -> Problem:
    return Problem(422, f"The request is invalid: {message}.", [{"field": field, "message": message}])


def _threads(request: Request) -> IncognitoThreads:
    threads: IncognitoThreads = runtime_of(request).extras["incognito"]
    return threads


async def _existing(request: Request, tenant: str, agent: str, key: str) -> KnownSession:
    if is_incognito(key):  # never in the session service's tables
        raise Problem(404, f"There is no session {key!r} for agent {agent!r}.")
    directory: SessionDirectory = runtime_of(request).extras["sessions"]
    found = await directory.session(tenant, agent, key)
    if found is None:
        raise Problem(404, f"There is no session {key!r} for agent {agent!r}.")
    return found


async def _start(
    request: Request,
    tenant: str,
    agent: str,
    command: Literal["create", "fork"],
    chat_type: ChatType,
    parent_session_key: str | None = None,
    from_message_id: str | None = None,
) -> CreatedSession:
    key, session_id = console_thread_key(agent), str(uuid.uuid4())
    event = SessionCommand(
        tenant_id=tenant, agent_id=agent, command=command, session_key=key, session_id=session_id,
        chat_type=chat_type, channel="dashboard", parent_session_key=parent_session_key,
        from_message_id=from_message_id,
    )  # fmt: skip
    published = await runtime_of(request).publisher.publish(event)
    return CreatedSession(session_key=key, session_id=session_id, position=str(published.seq))


async def _start_incognito(request: Request, tenant: str, body: NewSession) -> CreatedSession:
    if body.fork:
        raise _invalid("fork", INCOGNITO_NO_FORK)
    parent = body.parent_session_key
    if parent is not None and is_incognito(parent):
        if not await _threads(request).is_live(tenant, body.agent_id, parent):
            raise incognito.gone(parent)
    elif parent is not None:
        await _existing(request, tenant, body.agent_id, parent)
    key, session_id = incognito_thread_key(body.agent_id), str(uuid.uuid4())
    await _threads(request).create(tenant, body.agent_id, key, session_id, body.parent_session_key)
    return CreatedSession(session_key=key, session_id=session_id, position="0")


NO_SESSION: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such session for this agent (or an incognito thread that ended)"}
}


@router.post("/v1/sessions", status_code=201, response_model=CreatedSession, responses=NO_SESSION)
async def create_session(body: NewSession, tenant: Tenant, request: Request) -> CreatedSession:
    """Start a console thread, empty or (with `fork`) holding its parent's current window; an incognito
    thread lives in memory only and is never listed, searched or indexed."""
    if body.incognito:
        return await _start_incognito(request, tenant, body)
    if body.parent_session_key is None:
        if body.fork:
            raise _invalid("parent_session_key", "a fork needs parent_session_key")
        return await _start(request, tenant, body.agent_id, "create", "direct")
    parent = await _existing(request, tenant, body.agent_id, body.parent_session_key)
    if body.fork:
        return await _start(request, tenant, body.agent_id, "fork", parent.chat_type, body.parent_session_key)
    return await _start(request, tenant, body.agent_id, "create", "direct", body.parent_session_key)


@router.post("/v1/sessions/{session_key}/fork", status_code=201, response_model=CreatedSession, responses=NO_SESSION)
async def fork_session(session_key: SessionKey, body: ForkRequest, tenant: Tenant, request: Request) -> CreatedSession:
    """A child console thread holding the parent's current window (up to `from_message_id`); the parent is
    untouched."""
    if is_incognito(session_key):
        if not await _threads(request).is_live(tenant, body.agent_id, session_key):
            raise incognito.gone(session_key)
        raise _invalid("session_key", INCOGNITO_NO_FORK)
    parent = await _existing(request, tenant, body.agent_id, session_key)
    if body.from_message_id is not None:
        directory: SessionDirectory = runtime_of(request).extras["sessions"]
        if not await directory.has_message(tenant, parent.session_id, body.from_message_id):
            raise _invalid("from_message_id", f"no message {body.from_message_id!r} in session {session_key!r}")
    return await _start(request, tenant, body.agent_id, "fork", parent.chat_type, session_key, body.from_message_id)


@router.post("/v1/sessions/{session_key}/reset", status_code=202, response_model=ResetAccepted, responses=NO_SESSION)
async def reset_session(session_key: SessionKey, body: ResetRequest, tenant: Tenant, request: Request) -> ResetAccepted:
    """Start a fresh history window; nothing is deleted and the session id is kept (a key with no session
    yet gets one)."""
    if is_incognito(session_key):
        boundary = await incognito.reset(_threads(request), tenant, body.agent_id, session_key)
        return ResetAccepted(position=str(boundary.position))
    command = SessionCommand(
        tenant_id=tenant, agent_id=body.agent_id, command="reset", session_key=session_key, reason=body.reason
    )
    published = await runtime_of(request).publisher.publish(command)
    return ResetAccepted(position=str(published.seq))


class CompactionReport(BaseModel):
    agent_id: AgentId = "main"
    first_kept_message_id: Name = Field(
        min_length=1,
        max_length=256,
        description="the oldest message the compacted context keeps (our id or the adapter's)",
    )


@router.post(
    "/v1/sessions/{session_key}/compaction", status_code=202, response_model=ResetAccepted, responses=NO_SESSION
)
async def report_compaction(
    session_key: SessionKey, body: CompactionReport, tenant: Tenant, request: Request
) -> ResetAccepted:
    """The agent runtime compacted its context: closes the compaction cycle, so the next time the live
    window nears the limit `session.compaction-imminent` fires again. Incognito threads have no cycles
    (compaction-imminent never fires for them): the report is accepted and changes nothing."""
    if is_incognito(session_key):
        if not await _threads(request).is_live(tenant, body.agent_id, session_key):
            raise incognito.gone(session_key)
        return ResetAccepted(position="0")
    session = await _existing(request, tenant, body.agent_id, session_key)
    directory: SessionDirectory = runtime_of(request).extras["sessions"]
    if not await directory.has_message(tenant, session.session_id, body.first_kept_message_id):
        raise _invalid("first_kept_message_id", f"no message {body.first_kept_message_id!r} in session {session_key!r}")
    command = SessionCommand(
        tenant_id=tenant, agent_id=body.agent_id, command="compaction", session_key=session_key,
        first_kept_message_id=body.first_kept_message_id,
    )  # fmt: skip
    published = await runtime_of(request).publisher.publish(command)
    return ResetAccepted(position=str(published.seq))
