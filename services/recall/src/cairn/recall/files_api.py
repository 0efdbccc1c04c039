"""Memory files (API.md, query side): read a document or a window of its lines, any earlier version,
the list of an agent's documents, and a document's version history. Routes only; windows are `files`."""

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import BaseModel, Field

from cairn.edge.auth import Tenant
from cairn.edge.problems import Problem
from cairn.events.documents import PATH_PATTERN, path_problem
from cairn.events.envelope import MAX_VERSION
from cairn.events.fields import Name
from cairn.platform.runtime import runtime_of
from cairn.recall.files import DEFAULT_LINES, MAX_LINES, MAX_WINDOW_CHARS, window
from cairn.recall.files_queries import DocumentReads

router = APIRouter(tags=["memory"])
AgentId = Annotated[str, Query(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
# The layout is documented as a pattern, not enforced by FastAPI: a path outside it is answered 404 with what is
# wrong with it.
DocumentPath = Annotated[
    Name,
    Path(description="a path of the memory layout, such as MEMORY.md", json_schema_extra={"pattern": PATH_PATTERN}),
]
_PROBLEM_JSON: dict[str, Any] = {"application/problem+json": {}}
PROBLEMS: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such document (or version) for this agent and tenant", "content": _PROBLEM_JSON},
    422: {"description": "A query parameter is invalid; `errors` names it", "content": _PROBLEM_JSON},
}


class MemoryFile(BaseModel):
    path: str
    text: str
    version: int
    # `from` is a Python keyword; the wire name stays as API.md gives it
    from_: int = Field(serialization_alias="from", description="the window's first line (from 1)")
    lines: int = Field(description="lines in this window")
    total_lines: int
    next_from: int | None = Field(description="where the next window starts; null when this one reaches the end")
    truncated: bool = Field(description=f"the {MAX_WINDOW_CHARS}-character cap left out lines asked for")
    notice: str | None = Field(description="what was left out, and how to read on")
    updated_at: datetime


class FileEntry(BaseModel):
    path: str
    version: int
    updated_at: datetime
    bytes: int


class FileList(BaseModel):
    files: list[FileEntry]
    next_cursor: str | None = Field(default=None, description="pass as cursor for the next page")


class VersionEntry(BaseModel):
    version: int
    change: Literal["created", "updated", "deleted"]
    created_at: datetime
    bytes: int


class VersionList(BaseModel):
    path: str
    versions: list[VersionEntry] = Field(description="newest first; a deletion is a version without text")


def _reads(request: Request) -> DocumentReads:
    reads: DocumentReads = runtime_of(request).extras["documents"]
    return reads


def _missing(path: str, agent_id: str, version: int | None = None) -> Problem:
    what = f"memory file {path!r}" if version is None else f"version {version} of memory file {path!r}"
    problem = path_problem(path)
    reason = f" ({problem})" if problem else ""
    return Problem(404, f"There is no {what} for agent {agent_id!r}{reason}.")


MARKDOWN = "text/markdown; charset=utf-8"


@router.get(
    "/v1/memory/files/{path:path}",
    response_model=MemoryFile,
    response_model_by_alias=True,
    responses={**PROBLEMS, 200: {"content": {"text/markdown": {}}, "description": "JSON, or the whole document"}},
)
async def read_file(
    path: DocumentPath,
    tenant: Tenant,
    request: Request,
    response: Response,
    agent_id: AgentId = "main",
    from_: Annotated[int, Query(alias="from", ge=1, description="first line, from 1")] = 1,
    lines: Annotated[int, Query(ge=1, le=MAX_LINES)] = DEFAULT_LINES,
    version: Annotated[
        int | None, Query(ge=1, le=MAX_VERSION, description="an earlier version (default: the current one)")
    ] = None,
) -> MemoryFile | Response:
    """Read a memory document, or a window of its lines (at most `lines` lines and 12,000 characters);
    `version` reads an earlier version, also of a document deleted since. With `Accept: text/markdown`
    the answer is the whole document as it is stored (for tools such as `cairn memory export`)."""
    document = await _reads(request).document(tenant, agent_id, path, version)
    if document is None:
        raise _missing(path, agent_id, version)
    if "text/markdown" in request.headers.get("accept", ""):
        return Response(document.text, media_type=MARKDOWN, headers={"ETag": f'"{document.version}"'})
    shown = window(document.text, from_, lines)
    response.headers["ETag"] = f'"{document.version}"'
    return MemoryFile(
        path=path, text=shown.text, version=document.version, from_=shown.start, lines=shown.lines,
        total_lines=shown.total_lines, next_from=shown.next_from, truncated=shown.truncated, notice=shown.notice,
        updated_at=document.updated_at,
    )  # fmt: skip


@router.get("/v1/memory/files", response_model=FileList, responses=PROBLEMS)
async def list_files(
    tenant: Tenant,
    request: Request,
    agent_id: AgentId = "main",
    prefix: Annotated[Name, Query(max_length=512)] = "",
    limit: Annotated[int, Query(ge=1, le=1000)] = 500,
    cursor: Annotated[Name, Query(max_length=512, description="next_cursor of the previous page")] = "",
) -> FileList:
    """List an agent's memory documents by path, optionally under a path prefix."""
    rows = await _reads(request).documents(tenant, agent_id, prefix, cursor, limit + 1)
    files = [FileEntry.model_validate(r, from_attributes=True) for r in rows[:limit]]
    return FileList(files=files, next_cursor=files[-1].path if len(rows) > limit else None)


@router.get("/v1/memory/versions/{path:path}", response_model=VersionList, responses=PROBLEMS)
async def list_versions(
    path: DocumentPath,
    tenant: Tenant,
    request: Request,
    agent_id: AgentId = "main",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> VersionList:
    """A document's versions, newest first, deletions included: each readable with `?version=`."""
    rows = await _reads(request).versions(tenant, agent_id, path, limit)
    if not rows:
        raise _missing(path, agent_id)
    return VersionList(path=path, versions=[VersionEntry.model_validate(r, from_attributes=True) for r in rows])
