"""Schemathesis over every service's OpenAPI document, against the running stack: every operation gets its
documented examples, boundary cases (the coverage phase) and CAIRN_FUZZ_EXAMPLES generated requests, valid and
invalid, sent with a tenant's key (the admin token on admin routes). No answer may be a 5xx, and every answer
must be one the document describes: its status, content type, body schema and headers."""

import os
import re
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import schemathesis
from _pytest.nodeid import NodeId
from _pytest.nodes import Node
from hypothesis import HealthCheck, settings
from schemathesis import Case
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from cairn.local import LocalStack

AnyCase = Case[Any]
Credentials = Callable[[AnyCase], dict[str, str]]
# Generated requests per operation in the fuzzing phase, besides the examples and the coverage phase's cases.
EXAMPLES = int(os.environ.get("CAIRN_FUZZ_EXAMPLES", "200"))
# The same cases on every run unless another seed is asked for (to look further).
SEED = int(os.environ.get("CAIRN_FUZZ_SEED", "28"))
# Not `negative_data_rejection`: pydantic's lax mode takes `0` for false and "1" for 1, and an empty query
# parameter counts as absent (cairn.edge.query), both on purpose; `positive_data_acceptance` would need every
# generated agent, session and path to exist.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]
# A position the index has not reached makes a read wait its whole bound (5 s): a fuzzed agent never reaches one.
POSITION = re.compile(r"[0-9]{1,18}")
# One test runs all of a service's operations (ingest's take about a minute here): more than pytest's 300 s
# default, for a slower CI machine.
TIMEOUT_S = 600


if not hasattr(Node, "_nodeid"):
    # schemathesis 4.32's pytest integration renames each operation's report through `node._nodeid`, which
    # pytest 9.2 replaced by a parsed `_id`: the old name, mapped onto the new one, until schemathesis follows.
    def _read_node_id(node: Node) -> str:
        return node.nodeid

    def _write_node_id(node: Node, value: str) -> None:
        node._id = NodeId.parse(value)

    Node._nodeid = property(_read_node_id, _write_node_id)  # type: ignore[attr-defined]


def _config() -> schemathesis.Config:
    """Valid and invalid data, the same cases on every run (CI reproduces what a developer saw), no example
    database (nothing carried from one run to the next)."""
    return schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "generation": {"mode": "all", "max-examples": EXAMPLES, "deterministic": True, "database": "none"},
        }
    )


def _schema(stack: LocalStack, service: str) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{stack.url(service)}/openapi.json", config=_config(), timeout=10)


def without_waits(case: AnyCase) -> AnyCase:
    """The case without a valid `consistent_with` (an invalid one is kept, to be refused): the bounded wait is
    tested in test_freshness, and here it would only spend 5 s a case."""
    for part in (case.query, case.body):
        if not isinstance(part, dict):
            continue
        position = part.get("consistent_with")
        if isinstance(position, str) and POSITION.fullmatch(position):
            del part["consistent_with"]
    return case


@pytest.fixture(scope="module")
def tenant_key(services: LocalStack) -> str:
    """A fresh tenant of its own: what the fuzzer writes is kept apart from every other test's."""
    created = httpx.post(
        f"{services.url('ingest')}/v1/admin/tenants",
        json={"name": f"fuzz-{uuid.uuid4().hex[:8]}"},
        headers={"Authorization": f"Bearer {services.state.admin_token}"},
        timeout=10,
    )
    created.raise_for_status()
    key: str = created.json()["api_key"]
    return key


@pytest.fixture(scope="module")
def credentials(services: LocalStack, tenant_key: str) -> Credentials:
    def for_case(case: AnyCase) -> dict[str, str]:
        admin = case.operation.path.startswith("/v1/admin/")
        return {"Authorization": f"Bearer {services.state.admin_token if admin else tenant_key}"}

    return for_case


@pytest.fixture
def ingest_schema(services: LocalStack) -> schemathesis.BaseSchema:
    return _schema(services, "ingest")


@pytest.fixture
def recall_schema(services: LocalStack) -> schemathesis.BaseSchema:
    return _schema(services, "recall")


@pytest.fixture(params=["session", "indexer", "consolidation"])
def health_schema(services: LocalStack, request: pytest.FixtureRequest) -> schemathesis.BaseSchema:
    """The three services without a tenant-facing API serve only their health endpoints."""
    return _schema(services, request.param)


fuzz_settings = settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
ingest = schemathesis.pytest.from_fixture("ingest_schema")
recall = schemathesis.pytest.from_fixture("recall_schema")
health = schemathesis.pytest.from_fixture("health_schema")


@pytest.mark.e2e
@pytest.mark.timeout(TIMEOUT_S)
@ingest.parametrize()
@fuzz_settings
def test_ingest_answers_every_request_as_documented(case: AnyCase, credentials: Credentials) -> None:
    without_waits(case).call_and_validate(headers=credentials(case), checks=CHECKS, timeout=30)


@pytest.mark.e2e
@pytest.mark.timeout(TIMEOUT_S)
@recall.parametrize()
@fuzz_settings
def test_recall_answers_every_request_as_documented(case: AnyCase, credentials: Credentials) -> None:
    without_waits(case).call_and_validate(headers=credentials(case), checks=CHECKS, timeout=30)


@pytest.mark.e2e
@health.parametrize()
@fuzz_settings
def test_health_endpoints_answer_as_documented(case: AnyCase) -> None:
    case.call_and_validate(checks=CHECKS, timeout=30)
