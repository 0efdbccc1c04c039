"""Every route of ingest and recall has its access in `cairn.edge.scopes` (a scope, or explicitly public or the
admin token), and the route really asks for it: a scoped route authenticates a key (`current_key`), an
admin-token route the admin token (`require_admin`)."""

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from cairn.edge.auth import current_key, current_tenant
from cairn.edge.scopes import ADMIN_TOKEN, PUBLIC, SCOPES, access_of, documented_path
from cairn.ingest.api import require_admin
from cairn.ingest.app import create_app as create_ingest
from cairn.ingest.settings import IngestSettings
from cairn.recall.app import create_app as create_recall
from cairn.recall.settings import RecallSettings

# Authenticates by hand after reading its body once (see the route): checked by the e2e scope tests instead.
BY_HAND = {("POST", "/v1/messages/batch")}


@pytest.fixture(scope="module", params=["ingest", "recall"])
def app(request: pytest.FixtureRequest) -> FastAPI:
    return create_ingest(IngestSettings()) if request.param == "ingest" else create_recall(RecallSettings())


def _calls(dependant: Dependant) -> Iterator[Any]:
    for dependency in dependant.dependencies:
        yield dependency.call
        yield from _calls(dependency)


def test_every_documented_operation_has_an_access(app: FastAPI) -> None:
    document = app.openapi()
    missing = [
        (method.upper(), path)
        for path, item in document["paths"].items()
        for method in item
        if access_of(method, path) is None
    ]
    assert missing == []
    assert len(document["paths"]) > 10


def test_every_route_asks_for_the_access_the_table_gives_it(app: FastAPI) -> None:
    for route in app.routes:
        if not isinstance(route, APIRoute):
            continue
        for method in route.methods or ():
            access = access_of(method, route.path)
            calls = set(_calls(route.dependant))
            where = (method, documented_path(route.path))
            if access == ADMIN_TOKEN:
                assert require_admin in calls, where
            elif access in SCOPES and where not in BY_HAND:
                assert calls & {current_key, current_tenant}, where
            else:
                assert access in (PUBLIC, *SCOPES), where
