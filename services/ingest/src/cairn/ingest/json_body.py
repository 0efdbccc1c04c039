"""A route's JSON body read through one pydantic `TypeAdapter` instead of a FastAPI body parameter, for a route
whose per-request cost matters (`POST /v1/messages/batch`): FastAPI would parse the bytes with `json`, solve
the body as a dependency and copy the result into the model; here the common body is one `validate_json`.

A body that is not the common case gets FastAPI's own treatment, step by step (its content-type rule, its
`json_invalid` error for malformed JSON, its 400 for a body it cannot decode, its `body`-prefixed validation
errors in python mode), so the app's validation handler answers it exactly as for a declared body parameter.
FastAPI parses the body before it resolves the route's dependencies and validates it after them; `read` and
`Received.validated` are those two steps, so a route calls its key lookup in between to keep that order.
tests/integration/test_ingest_batch_route.py holds every answer to a declared body parameter's, so a FastAPI
upgrade that changes them shows there.
"""

import email.message
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fastapi import FastAPI
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.models import Schema
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import PydanticUndefined
from starlette.exceptions import HTTPException

ModelT = TypeVar("ModelT", bound=BaseModel)
REF_TEMPLATE = "#/components/schemas/{model}"
# What FastAPI documents for an operation with a body parameter: its schema of a 422 answer.
VALIDATION_ERROR = {
    "description": "Validation Error",
    "content": {"application/json": {"schema": {"$ref": REF_TEMPLATE.format(model="HTTPValidationError")}}},
}


def is_json(content_type: str | None) -> bool:
    """FastAPI's rule for a body it parses as JSON: `application/json` or `application/*+json`, parameters
    allowed; no content type at all is not JSON (its strict content type)."""
    if content_type == "application/json":
        return True
    if not content_type:
        return False
    header = email.message.Message()
    header["content-type"] = content_type
    subtype = header.get_content_subtype()
    return header.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def decoded(content_type: str | None, body: bytes) -> Any:
    """The body as FastAPI hands it to validation: undefined when empty, the bytes when not JSON, else the
    parsed JSON; malformed JSON is its 422, a body it cannot decode its 400."""
    if not body:
        return PydanticUndefined
    if not is_json(content_type):
        return body
    try:
        return json.loads(body)
    except json.JSONDecodeError as error:
        invalid = {"type": "json_invalid", "loc": ("body", error.pos), "msg": "JSON decode error", "input": {}}
        raise RequestValidationError([{**invalid, "ctx": {"error": error.msg}}], body=error.doc) from error
    except (ValueError, RecursionError) as error:  # not UTF-8/16/32, or nested past the parser's depth
        raise HTTPException(400, "There was an error parsing the body") from error


@dataclass(frozen=True)
class Received(Generic[ModelT]):
    """A body between its reading and its validation: already the model when it was the common case."""

    adapter: TypeAdapter[ModelT]
    value: Any
    valid: bool = False

    def validated(self) -> ModelT:
        if self.valid:
            return self.value  # type: ignore[no-any-return]
        if self.value is PydanticUndefined:
            missing = {"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}
            raise RequestValidationError([missing])
        try:
            return self.adapter.validate_python(self.value, from_attributes=True)
        except ValidationError as error:
            errors = [{**e, "loc": ("body", *e["loc"])} for e in error.errors(include_url=False)]
            raise RequestValidationError(errors, body=self.value) from None


class JsonBody(Generic[ModelT]):
    """The body of one route, and what its OpenAPI operation says about it (as for a body parameter)."""

    def __init__(self, model: type[ModelT]) -> None:
        self.model = model
        self.adapter = TypeAdapter(model)
        schema = {"$ref": REF_TEMPLATE.format(model=model.__name__)}
        self.openapi_extra = {"requestBody": {"content": {"application/json": {"schema": schema}}, "required": True}}

    def read(self, content_type: str | None, body: bytes) -> Received[ModelT]:
        if body and is_json(content_type):
            try:
                return Received(self.adapter, self.adapter.validate_json(body), valid=True)
            except ValidationError:
                pass  # malformed or not the model: FastAPI's steps below give its own error
        return Received(self.adapter, decoded(content_type, body))


def _as_written(schema: dict[str, Any]) -> Any:
    """A schema with its members in the order FastAPI writes the document's (through its `Schema` model)."""
    return jsonable_encoder(Schema(**schema), by_alias=True, exclude_none=True)


def document_bodies(app: FastAPI, bodies: list[JsonBody[Any]]) -> None:
    """List the bodies' models among the OpenAPI document's schemas, where FastAPI lists a body parameter's
    model: a route that reads its body itself declares none, and its `openapi_extra` only points there."""
    generate: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = generate()  # kept by FastAPI as `app.openapi_schema`: completed in place
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        for body in bodies:
            schema = body.adapter.json_schema(ref_template=REF_TEMPLATE)
            defined = {**schema.pop("$defs", {}), body.model.__name__: schema}
            schemas.update({name: _as_written(s) for name, s in defined.items()})
        document["components"]["schemas"] = dict(sorted(schemas.items()))  # sorted, as FastAPI writes them
        return document

    app.openapi = openapi  # type: ignore[method-assign]
