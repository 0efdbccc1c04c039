"""The problem answers every API route can give, written into each service's OpenAPI document in one place: the
edge (auth, body limit, concurrency limit, the exception mapping) answers them for every route, so no route
lists them itself. Every error response is described as the problem+json document it is, replacing FastAPI's
default 422 (`HTTPValidationError`, application/json), which no cairn route ever sends."""

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from cairn.edge.limits import HEALTH_PATHS
from cairn.edge.problems import PROBLEM_JSON

PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "description": "RFC 9457 problem details; `errors` names each failing field of a 422",
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["field", "message"],
                "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
            },
        },
        "trace_id": {"type": "string", "description": "on a 500: quote it when you report the error"},
    },
}
_PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
_RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before trying again", "schema": {"type": "integer"}}}
# Answered by the edge for any route, whatever the route itself does.
EVERY_ROUTE: dict[str, dict[str, Any]] = {
    "401": {"description": "No API key, or one that is not valid (admin routes: not the admin token)"},
    "422": {"description": "The request is invalid: `errors` names each field and what is wrong with it"},
    "429": {
        "description": "A rate limit or quota of the tenant or its key (`errors` names the limit), or too many "
        "invalid keys from this address; every counted answer carries RateLimit-Limit, -Remaining and -Reset",
        "headers": _RETRY_AFTER,
    },
    "500": {"description": "An unexpected error: the answer carries a `trace_id` to quote"},
    "503": {
        "description": "A dependency (Postgres, NATS, Redis) is down, or the process is at its concurrency limit",
        "headers": _RETRY_AFTER,
    },
}
WITH_BODY: dict[str, dict[str, Any]] = {
    "400": {"description": "The body cannot be read as JSON text (it is not UTF-8)"},
    "408": {"description": "The request body did not arrive whole in time (`CAIRN_HTTP_BODY_TIMEOUT_S`)"},
    "413": {"description": "The request body is over the size limit (refused before it is read)"},
}
# A tenant's key is checked against the route's scope and, for a key limited to agents, the agents it names.
KEYED: dict[str, dict[str, Any]] = {
    "403": {"description": "The API key lacks the scope this route needs, or names an agent the key is not for"},
}
ADMIN: dict[str, dict[str, Any]] = {
    "403": {"description": "A tenant's API key: admin routes take the admin token"},
}
# FastAPI's own 422 models, unused once every error is described as a problem.
_FASTAPI_VALIDATION_SCHEMAS = ("HTTPValidationError", "ValidationError")


def with_problem_responses(document: dict[str, Any]) -> dict[str, Any]:
    """The document with the edge's problem answers on every API operation and every 4xx/5xx described as a
    problem+json `Problem` (a route's own description of one, such as a 404's, is kept)."""
    for path, item in document.get("paths", {}).items():
        if path in HEALTH_PATHS:
            continue
        for operation in item.values():
            responses: dict[str, Any] = operation.setdefault("responses", {})
            for status, answer in _edge_answers(path, operation).items():
                responses.setdefault(status, dict(answer))
            for status, answer in responses.items():
                if status[0] in "45":
                    answer["content"] = {PROBLEM_JSON: {"schema": _PROBLEM_REF}}
    schemas: dict[str, Any] = document.setdefault("components", {}).setdefault("schemas", {})
    for name in _FASTAPI_VALIDATION_SCHEMAS:
        schemas.pop(name, None)
    schemas["Problem"] = PROBLEM_SCHEMA
    # in FastAPI's own order (by name), so a schema added to the document later lands where FastAPI would put it
    document["components"]["schemas"] = dict(sorted(schemas.items()))
    return document


def _edge_answers(path: str, operation: dict[str, Any]) -> dict[str, dict[str, Any]]:
    answers = dict(EVERY_ROUTE)
    if "requestBody" in operation:
        answers.update(WITH_BODY)
    answers.update(ADMIN if path.startswith("/v1/admin/") else KEYED)
    return answers


def document_problems(app: FastAPI) -> None:
    """Make the app's `/openapi.json` the document `with_problem_responses` describes (built once, cached by
    FastAPI as before)."""
    generate: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = with_problem_responses(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to shape the document
