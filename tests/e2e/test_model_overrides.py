"""A tenant's model, set by the operator through ingest's admin API only, to hosts on the allow-list
(`CAIRN_LLM_ALLOWED_HOSTS`, set by tests/conftest.py); read by every service through `cairn.llm.Models`; and the
tenant's token usage, readable by the operator and by the tenant (its own only). Against the running services and
a real model server (tests/model_api.py)."""

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import httpx
import pytest
from pydantic import SecretStr

from cairn.llm import LlmSettings, Models, Usage
from cairn.local import LocalStack
from cairn.storage.postgres import create_pool
from cairn.storage.settings import PostgresSettings
from tests.conftest import Tenant
from tests.model_api import ModelServer, Reply, Status

pytestmark = pytest.mark.e2e
ALLOWED = "127.0.0.1,llm.allowed.example,[fd00::7]"  # as tests/conftest.py sets it


@pytest.fixture
def admin(services: LocalStack) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {services.state.admin_token}"}
    with httpx.Client(base_url=services.url("ingest"), headers=headers, timeout=30) as client:
        yield client


@pytest.fixture
async def pool(services: LocalStack) -> AsyncIterator["asyncpg.Pool[asyncpg.Record]"]:
    """Connected as cairn_app, as the services are."""
    created = await create_pool(PostgresSettings(url=SecretStr(services.postgres_url()), pool_min=1, pool_max=2))
    try:
        yield created
    finally:
        await created.close()


def model_path(tenant: str) -> str:
    return f"/v1/admin/tenants/{tenant}/llm"


def problem_field(response: httpx.Response, status: int, field: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    messages = [e["message"] for e in response.json()["errors"] if e["field"] == field]
    assert messages, response.json()
    return str(messages[0])


def test_an_override_is_stored_shown_without_its_key_and_deleted(admin: httpx.Client, tenant: Tenant) -> None:
    path = model_path(tenant.tenant_id)
    assert admin.get(path).status_code == 404
    put = admin.put(path, json={"base_url": "https://LLM.allowed.example./v1", "model": "qwen3", "api_key": "sk-9x"})
    assert put.status_code == 200, put.text
    shown = admin.get(path)
    assert shown.status_code == 200
    body = shown.json()
    assert body["tenant_id"] == tenant.tenant_id
    assert body["base_url"] == "https://LLM.allowed.example./v1"
    assert body["model"] == "qwen3"
    assert body["api_key_set"] is True
    assert "api_key" not in body
    assert "sk-9x" not in shown.text
    assert "sk-9x" not in put.text
    replaced = admin.put(path, json={"base_url": "http://[fd00::7]:8080/v1", "model": "llama"})
    assert replaced.json()["api_key_set"] is False
    assert admin.delete(path).status_code == 204
    assert admin.get(path).status_code == 404
    assert admin.delete(path).status_code == 404


@pytest.mark.parametrize(
    ("base_url", "rule"),
    [
        ("http://llm.allowed.example@169.254.169.254/", "user name or password"),
        ("http://169.254.169.254#llm.allowed.example", "query or a fragment"),
        ("http://169.254.169.254/latest/meta-data", "allow-list"),
        ("http://[::ffff:a9fe:a9fe]/v1", "allow-list"),
        ("http://llm.allowed.example.evil.example/v1", "allow-list"),
        ("http://localhost:11434/v1", "allow-list"),
        ("gopher://llm.allowed.example/", "http or https"),
    ],
)
def test_an_override_off_the_allow_list_is_refused_naming_base_url(
    admin: httpx.Client, tenant: Tenant, base_url: str, rule: str
) -> None:
    path = model_path(tenant.tenant_id)
    refused = admin.put(path, json={"base_url": base_url, "model": "m", "api_key": "k"})
    assert rule in problem_field(refused, 422, "base_url")
    assert admin.get(path).status_code == 404, "a refused override is not stored"


def test_only_the_admin_token_reaches_the_model_routes(admin: httpx.Client, tenant: Tenant) -> None:
    path = model_path(tenant.tenant_id)
    body = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
    assert tenant.ingest.put(path, json=body).status_code == 403
    assert httpx.put(f"{admin.base_url}{path}", json=body, timeout=10).status_code == 401
    assert tenant.ingest.get(f"/v1/admin/tenants/{tenant.tenant_id}/usage").status_code == 403
    assert admin.put(model_path(str(uuid.uuid4())), json=body).status_code == 404
    assert admin.get(f"/v1/admin/tenants/{uuid.uuid4()}/usage").status_code == 404
    assert admin.get("/v1/admin/tenants/not-a-uuid/llm").status_code == 422


def test_an_empty_allow_list_allows_no_override(services: LocalStack, tenant: Tenant) -> None:
    replica = services.add_replica("ingest")
    kept = dict(services.extra_env)
    services.extra_env["CAIRN_LLM_ALLOWED_HOSTS"] = ""
    try:
        services.start_service(replica)
    finally:
        services.extra_env = kept
    try:
        services.wait_ready(replica)
        refused = httpx.put(
            f"{services.url(replica)}{model_path(tenant.tenant_id)}",
            json={"base_url": "http://127.0.0.1:9/v1", "model": "m"},
            headers={"Authorization": f"Bearer {services.state.admin_token}"},
            timeout=10,
        )
        assert "empty" in problem_field(refused, 422, "base_url")
    finally:
        services.kill_service(replica)


async def test_models_follow_the_override_within_the_cache_bound(
    admin: httpx.Client, tenant: Tenant, pool: "asyncpg.Pool[asyncpg.Record]"
) -> None:
    path = model_path(tenant.tenant_id)
    with ModelServer() as deployment, ModelServer() as tenants_own:
        settings = LlmSettings(base_url=deployment.url, model="default-model", allowed_hosts=ALLOWED.split(","))
        models = Models(settings, pool, cache_s=0.2)
        try:
            default = await models.for_tenant(tenant.tenant_id)
            assert default is not None
            assert (default.base_url, default.model) == (deployment.url, "default-model")

            stored = await asyncio.to_thread(
                admin.put, path, json={"base_url": tenants_own.url, "model": "own-model", "api_key": "sk-own"}
            )
            assert stored.status_code == 200, stored.text
            own = await _eventually(models, tenant.tenant_id, lambda c: c is not None and c.model == "own-model")
            assert own is not None
            tenants_own.script(Reply("from the tenant's own model"))
            assert (await own.chat([{"role": "user", "content": "hi"}])).content == "from the tenant's own model"
            (sent,) = tenants_own.requests
            assert (sent.model, sent.authorization) == ("own-model", "Bearer sk-own")
            assert deployment.requests == []

            assert (await asyncio.to_thread(admin.delete, path)).status_code == 204
            await _eventually(models, tenant.tenant_id, lambda c: c is not None and c.model == "default-model")
        finally:
            await models.aclose()


async def test_no_default_and_no_override_is_no_model(tenant: Tenant, pool: "asyncpg.Pool[asyncpg.Record]") -> None:
    models = Models(LlmSettings(base_url=None, model=None), pool)
    assert await models.for_tenant(tenant.tenant_id) is None


async def _eventually(models: Models, tenant: str, check: Any, within: float = 10.0) -> Any:
    async with asyncio.timeout(within):
        while True:
            client = await models.for_tenant(tenant)
            if check(client):
                return client
            await asyncio.sleep(0.05)


async def test_usage_is_counted_per_day_purpose_and_model_and_read_by_its_tenant_only(
    admin: httpx.Client, tenant: Tenant, other_tenant: Tenant, pool: "asyncpg.Pool[asyncpg.Record]"
) -> None:
    with ModelServer() as server:
        server.script(Reply("one", prompt_tokens=100, completion_tokens=10), Reply("two", 50, 5), Status(503))
        models = Models(LlmSettings(base_url=server.url, model="m1"), pool)
        try:
            client = await models.for_tenant(tenant.tenant_id)
            assert client is not None
            for _ in range(2):
                await models.record_usage(
                    tenant.tenant_id, "recall", await client.chat([{"role": "user", "content": "q"}])
                )
            await models.record_usage(tenant.tenant_id, "recall", None, failed=True, model=client.model)
            await models.record_usage(tenant.tenant_id, "memory-writer", Usage(7, 3), model="m2")
        finally:
            await models.aclose()

    operators = await asyncio.to_thread(admin.get, f"/v1/admin/tenants/{tenant.tenant_id}/usage")
    assert operators.status_code == 200, operators.text
    report = operators.json()
    lines = {(line["purpose"], line["model"]): line for line in report["days"]}
    assert set(lines) == {("recall", "m1"), ("memory-writer", "m2")}
    recall = lines[("recall", "m1")]
    assert (recall["calls"], recall["failures"], recall["prompt_tokens"], recall["completion_tokens"]) == (
        3,
        1,
        150,
        15,
    )
    assert report["total"] == {"calls": 4, "failures": 1, "prompt_tokens": 157, "completion_tokens": 18}
    assert recall["day"] == report["to"]

    own = await asyncio.to_thread(tenant.recall.get, "/v1/usage", params={"from": report["from"], "to": report["to"]})
    assert own.status_code == 200, own.text
    assert {name: value for name, value in own.json().items() if name != "limits"} == report  # + its limits' use
    others = (await asyncio.to_thread(other_tenant.recall.get, "/v1/usage")).json()
    assert others["tenant_id"] == other_tenant.tenant_id
    assert others["days"] == []
    past = (
        await asyncio.to_thread(tenant.recall.get, "/v1/usage", params={"from": "2020-01-01", "to": "2020-01-31"})
    ).json()
    assert past["days"] == []


def test_a_usage_window_out_of_order_or_too_long_is_refused(admin: httpx.Client, tenant: Tenant) -> None:
    assert "after" in problem_field(
        tenant.recall.get("/v1/usage", params={"from": "2026-02-02", "to": "2026-02-01"}), 422, "from"
    )
    path = f"/v1/admin/tenants/{tenant.tenant_id}/usage"
    assert "366" in problem_field(admin.get(path, params={"from": "2020-01-01", "to": "2026-01-01"}), 422, "from")
    assert tenant.recall.get("/v1/usage", params={"to": "yesterday"}).status_code == 422
    assert "1900" in problem_field(tenant.recall.get("/v1/usage", params={"to": "0001-01-01"}), 422, "to")
    assert "1900" in problem_field(admin.get(path, params={"from": "1899-12-31", "to": "1900-01-01"}), 422, "from")
    earliest = tenant.recall.get("/v1/usage", params={"to": "1900-01-05"})
    assert earliest.status_code == 200, earliest.text
    assert earliest.json()["from"] == "1900-01-01"


async def test_a_tenant_keeps_its_last_known_model_while_postgres_cannot_be_read(
    services: LocalStack, tenant: Tenant, other_tenant: Tenant
) -> None:
    settings = LlmSettings(base_url="http://127.0.0.1:9/v1", model="default-model")
    lost = await create_pool(PostgresSettings(url=SecretStr(services.postgres_url()), pool_min=1, pool_max=1))
    models = Models(settings, lost, cache_s=0)
    try:
        known = await models.for_tenant(tenant.tenant_id)
        assert known is not None
        await lost.close()  # every later read of an override fails
        assert await models.for_tenant(tenant.tenant_id) is known
        with pytest.raises(asyncpg.InterfaceError):
            await models.for_tenant(other_tenant.tenant_id)  # never read: nothing to fall back on
    finally:
        await models.aclose()
