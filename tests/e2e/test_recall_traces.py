"""The recall trace routes of the running recall service (API.md, query side): `GET /v1/recall/traces/{trace_id}`
answers the tenant's trace and 404 problem+json for an unknown id or another tenant's; `GET /v1/recall/traces`
lists a session's traces newest first within `limit` (1..100, default 20); both need the tenant's key. The traces
are stored as the recall endpoint stores them (TraceStore.save), then read through the public API only."""

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import SecretStr

from cairn.local import LocalStack
from cairn.recall.recall_traces import RecallTrace, TraceStore, new_trace_id
from cairn.storage.postgres import create_pool
from cairn.storage.settings import PostgresSettings
from tests.conftest import Tenant

pytestmark = pytest.mark.e2e
SESSION = "agent:main:telegram:direct:123"


@pytest.fixture
async def traces(services: LocalStack) -> AsyncIterator[TraceStore]:
    pool = await create_pool(PostgresSettings(url=SecretStr(services.postgres_url()), pool_min=1, pool_max=2))
    store = TraceStore(pool, None)
    try:
        yield store
    finally:
        await pool.close()


def trace(age_s: float, outcome: str = "injected", session_key: str = SESSION) -> RecallTrace:
    return RecallTrace(
        trace_id=new_trace_id(),
        agent_id="main",
        session_key=session_key,
        query="我下周有什么安排？",
        lane=1 if outcome == "injected" else None,
        outcome=outcome,
        reason=None if outcome == "injected" else "no strong hit",
        candidates=[{"lane": 1, "path": "MEMORY.md", "lines": [3, 3], "score": 0.71, "snippet": "周二 上海 发布会"}],
        injected=[{"snippet": "周二 上海 发布会", "source": "MEMORY.md#L3"}] if outcome == "injected" else [],
        timings_ms={"lane1": 4.5, "total": 5.25},
        model=None,
        tokens={},
        fallbacks=[],
        created_at=datetime.now(UTC) - timedelta(seconds=age_s),
    )


async def saved(store: TraceStore, tenant: Tenant, *made: RecallTrace) -> None:
    for t in made:
        await store.save(tenant.tenant_id, t)
    assert await store.settled(10)
    assert store.dropped == 0


async def test_a_trace_is_read_by_its_id_and_only_by_its_tenant(
    traces: TraceStore, tenant: Tenant, other_tenant: Tenant
) -> None:
    stored = trace(age_s=1)
    await saved(traces, tenant, stored)

    response = tenant.recall.get(f"/v1/recall/traces/{stored.trace_id}")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["trace_id"] == stored.trace_id
    assert (body["outcome"], body["lane"], body["query"]) == ("injected", 1, "我下周有什么安排？")
    assert body["candidates"] == stored.candidates
    assert body["injected"] == stored.injected
    assert (body["timings_ms"], body["tokens"], body["model"]) == ({"lane1": 4.5, "total": 5.25}, {}, None)
    assert datetime.fromisoformat(body["created_at"]) == stored.created_at

    for response in (
        other_tenant.recall.get(f"/v1/recall/traces/{stored.trace_id}"),
        tenant.recall.get(f"/v1/recall/traces/{new_trace_id()}"),
        tenant.recall.get("/v1/recall/traces/not-a-trace-id"),
    ):
        assert response.status_code == 404, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["status"] == 404


async def test_a_sessions_traces_are_listed_newest_first_within_the_limit(
    traces: TraceStore, tenant: Tenant, other_tenant: Tenant
) -> None:
    made = [trace(age_s=age, outcome="none" if age % 20 else "injected") for age in (30, 10, 20, 40)]
    await saved(traces, tenant, *made, trace(age_s=0, session_key="agent:main:main"))
    newest_first = [t.trace_id for t in sorted(made, key=lambda t: t.created_at, reverse=True)]

    listed = tenant.recall.get("/v1/recall/traces", params={"session_key": SESSION})
    assert listed.status_code == 200, listed.text
    assert [t["trace_id"] for t in listed.json()["traces"]] == newest_first
    two = tenant.recall.get("/v1/recall/traces", params={"session_key": SESSION, "agent_id": "main", "limit": 2})
    assert [t["trace_id"] for t in two.json()["traces"]] == newest_first[:2]
    other_agent = tenant.recall.get("/v1/recall/traces", params={"session_key": SESSION, "agent_id": "helper"})
    assert other_agent.json() == {"traces": []}
    assert other_tenant.recall.get("/v1/recall/traces", params={"session_key": SESSION}).json() == {"traces": []}

    refusals: list[dict[str, str | int]] = [
        {"session_key": SESSION, "limit": 0},
        {"session_key": SESSION, "limit": 101},
        {},
    ]
    for params in refusals:
        refused = tenant.recall.get("/v1/recall/traces", params=params)
        assert refused.status_code == 422, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")


async def test_the_trace_routes_need_the_tenants_key(services: LocalStack, tenant: Tenant) -> None:
    anonymous = tenant.recall.get(f"/v1/recall/traces/{new_trace_id()}", headers={"Authorization": ""})
    assert anonymous.status_code == 401
    listed = tenant.recall.get("/v1/recall/traces", params={"session_key": SESSION}, headers={"Authorization": ""})
    assert listed.status_code == 401
