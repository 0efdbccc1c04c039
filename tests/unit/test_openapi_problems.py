"""The OpenAPI document describes the edge's problem answers on every API route, as problem+json."""

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

from cairn.edge.openapi import document_problems

PROBLEM = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}


class Note(BaseModel):
    text: str


def _document() -> dict[str, Any]:
    app = FastAPI()

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/notes/{name}", responses={404: {"description": "no such note"}})
    async def read(name: str) -> Note:
        return Note(text=name)

    @app.post("/v1/notes")
    async def write(note: Note) -> Note:
        return note

    @app.post("/v1/admin/notes")
    async def admin_write(note: Note) -> Note:
        return note

    document_problems(app)
    return app.openapi()


def test_every_api_route_lists_the_edge_answers_as_problems() -> None:
    paths = _document()["paths"]
    read, write, admin = paths["/v1/notes/{name}"]["get"], paths["/v1/notes"]["post"], paths["/v1/admin/notes"]["post"]
    assert set(read["responses"]) == {"200", "401", "403", "404", "422", "429", "500", "503"}
    assert set(write["responses"]) == {"200", "400", "401", "403", "408", "413", "422", "429", "500", "503"}
    assert set(admin["responses"]) == set(write["responses"])
    assert admin["responses"]["403"]["description"] != write["responses"]["403"]["description"]
    for operation in (read, write, admin):
        for status, answer in operation["responses"].items():
            assert (answer["content"] == PROBLEM) == (status != "200"), (status, answer)


def test_a_route_keeps_its_own_description_and_503_names_retry_after() -> None:
    responses = _document()["paths"]["/v1/notes/{name}"]["get"]["responses"]
    assert responses["404"]["description"] == "no such note"
    assert responses["503"]["headers"]["Retry-After"]["schema"] == {"type": "integer"}


def test_fastapi_validation_models_are_replaced_by_the_problem_schema() -> None:
    document = _document()
    schemas = document["components"]["schemas"]
    assert "HTTPValidationError" not in schemas
    assert "ValidationError" not in schemas
    assert schemas["Problem"]["required"] == ["type", "title", "status", "detail"]
    assert "HTTPValidationError" not in str(document)


def test_health_endpoints_are_left_as_they_are() -> None:
    assert set(_document()["paths"]["/healthz"]["get"]["responses"]) == {"200"}
