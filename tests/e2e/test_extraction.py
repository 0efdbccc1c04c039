"""Extraction after turns through the running services: messages posted to ingest reach consolidation as
transcript entries, are batched per session (CAIRN_EXTRACTION_DEBOUNCE_S=2 here) and read by the tenant's model,
the protocol-speaking test server set as the tenant's override; `GET /v1/memory/status` reports what was done,
and with no model, what is pending, never faked."""

import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from cairn.local import LocalStack
from tests.conftest import Tenant
from tests.model_api import CallTools, ModelServer

pytestmark = pytest.mark.e2e


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


def status_until(tenant: Tenant, done: Any, within: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        response = tenant.recall.get("/v1/memory/status", params={"agent_id": "main"})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        if done(body["extraction"]) or time.monotonic() > deadline:
            return body
        time.sleep(0.2)


def batch(tenant: Tenant, texts: list[str], **fields: Any) -> None:
    messages = [{"text": t, "message_id": f"m-{uuid.uuid4().hex[:10]}", **fields} for t in texts]
    response = tenant.ingest.post("/v1/messages/batch", json={"messages": messages})
    assert response.status_code == 202, response.text


def test_without_a_model_turns_are_reported_pending_not_extracted(tenant: Tenant) -> None:
    batch(tenant, ["I moved to Berlin", "my sister is called Ana", "我不吃辣了"])
    body = status_until(tenant, lambda e: e and e["turns_without_model"] >= 3)
    assert body["extraction"]["turns_without_model"] == 3
    assert (body["extraction"]["model_calls"], body["extraction"]["candidates"]) == (0, 0)
    assert any(f.startswith("extraction pending: 3 turns") for f in body["fallbacks"]), body["fallbacks"]


def test_ten_turns_cost_one_call_of_the_tenants_model(
    services: LocalStack, tenant: Tenant, model_server: ModelServer
) -> None:
    admin = {"Authorization": f"Bearer {services.state.admin_token}"}
    put = httpx.put(f"{services.url('ingest')}/v1/admin/tenants/{tenant.tenant_id}/llm",
                    json={"base_url": model_server.url, "model": "test-model"}, headers=admin, timeout=10)  # fmt: skip
    assert put.status_code == 200, put.text
    plan = {"kind": "plan", "text": "User flies to Shanghai next Tuesday", "entity": "user", "relation": "trip",
            "importance": 0.9, "original": "下周二我去上海", "turns": [1]}  # fmt: skip
    model_server.script(then=CallTools(("record_memories", {"memories": [plan]}), prompt_tokens=500))
    batch(tenant, [f"turn {n}: 下周二我去上海" for n in range(10)])
    body = status_until(tenant, lambda e: e and e["turns"] >= 10)
    extraction = body["extraction"]
    assert (extraction["turns"], extraction["model_calls"], extraction["candidates"]) == (10, 1, 1)
    assert extraction["prompt_tokens"] == 500
    assert len(model_server.requests) == 1
    assert all(f"turn {n}:" in model_server.requests[0].messages[-1]["content"] for n in range(10))

    # the candidate becomes a record (through a record request in the ingest stream), dated and rendered
    deadline, records = time.monotonic() + 30, list[dict[str, Any]]()
    while not records and time.monotonic() < deadline:
        listed = tenant.recall.get("/v1/memory/records", params={"agent_id": "main"})
        assert listed.status_code == 200, listed.text
        records = listed.json()["records"]
        time.sleep(0.2)
    assert [(r["kind"], r["text"], r["original"]) for r in records] == [
        ("plan", "User flies to Shanghai next Tuesday", "下周二我去上海")
    ]
    record = records[0]
    assert record["provenance"]["origin"] == "owner"
    assert len(record["provenance"]["message_ids"]) == 1
    said = datetime.fromisoformat(record["recorded_at"])
    assert datetime.fromisoformat(record["valid_from"]).weekday() == 1  # a Tuesday: "下周二" resolved
    assert datetime.fromisoformat(record["valid_from"]) > said - timedelta(days=1)
    bank = tenant.recall.get("/v1/memory/files/memory/bank/plans.md", params={"agent_id": "main"})
    assert bank.status_code == 200, bank.text
    assert "User flies to Shanghai next Tuesday" in bank.json()["text"]
