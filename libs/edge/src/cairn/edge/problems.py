"""RFC 9457 problem+json for every error a service returns, with the failing fields named. What an exception
no handler here knows is answered is decided in `cairn.edge.errors` (503 for a dependency that is down)."""

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

PROBLEM_JSON = "application/problem+json"
# Where the edge notes in a request's ASGI scope why it answered 503, as (reason, dependency): ("dependency_down",
# "postgres" | "nats" | "redis" | "unknown") or ("overload", "none"), for the request metrics around it to count
# refusals by reason without knowing how each was decided.
REFUSAL_REASON = "cairn.refusal_reason"

TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Version conflict",
    413: "Too large",
    422: "Invalid request",
    429: "Rate limited",
    500: "Internal error",
    503: "Unavailable",
}


class Problem(Exception):
    """Raise to answer with a problem document; `errors` lists `{field, message}` pairs."""

    def __init__(
        self,
        status: int,
        detail: str,
        errors: list[dict[str, str]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status, self.detail, self.errors, self.headers = status, detail, errors, headers


def problem_response(
    status: int,
    detail: str,
    errors: list[dict[str, str]] | None = None,
    headers: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
) -> JSONResponse:
    """A problem document; `extra` adds members of its own (RFC 9457 extensions, e.g. `trace_id`)."""
    body: dict[str, Any] = {
        "type": f"https://cairn.dev/problems/{status}",
        "title": TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
    }
    if errors is not None:
        body["errors"] = errors
    body.update(extra or {})
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def _field(loc: tuple[Any, ...]) -> str:
    """The field's path without its location: ("body", "query") is the body's field `query`."""
    inside = loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc
    return ".".join(str(p) for p in inside) or "body"


def validation_errors(exc: RequestValidationError) -> list[dict[str, str]]:
    errors = []
    for error in exc.errors():
        message = str(error.get("msg", "invalid"))
        ctx = error.get("ctx") or {}
        if "max_length" in ctx:
            message = f"{message} (limit {ctx['max_length']})"
        errors.append({"field": _field(tuple(error.get("loc", ()))), "message": message})
    return errors


def validation_problem(exc: RequestValidationError) -> JSONResponse:
    """The 422 answer to a request that failed validation, naming every failing field."""
    errors = validation_errors(exc)
    fields = ", ".join(e["field"] for e in errors)
    return problem_response(422, f"The request is invalid: check {fields}.", errors)


def install_problem_handlers(app: FastAPI) -> None:
    async def on_problem(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, Problem)
        return problem_response(exc.status, exc.detail, exc.errors, exc.headers)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return validation_problem(exc)

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        return problem_response(exc.status_code, str(exc.detail), headers=dict(exc.headers or {}))

    app.add_exception_handler(Problem, on_problem)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
