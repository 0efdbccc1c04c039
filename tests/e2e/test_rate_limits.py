"""Issue 31, rate limits and quotas on the running stack: every counted answer carries RateLimit-* headers; past a
tenant's or a key's rate, or its daily messages, the answer is 429 problem+json with Retry-After; the count is
shared by replicas; limits set through the admin API reach every replica; invalid keys from one address are
throttled without a lookup each; and with Redis away requests are still served.

Rates in these tests are one request per 20 s or slower, so that no refill happens while a test runs, however
slow the machine: every assertion is about counts, never about time."""

import asyncio
import hashlib
import re
import secrets
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import asyncpg
import httpx
import pytest

from cairn.local import LocalStack
from tests.conftest import Tenant

pytestmark = pytest.mark.e2e
SLOW = 0.05  # requests per second: one per 20 s


def _admin(stack: LocalStack) -> dict[str, str]:
    return {"Authorization": f"Bearer {stack.state.admin_token}"}


def put_limits(stack: LocalStack, tenant_id: str, body: dict[str, object]) -> dict[str, object]:
    response = httpx.put(
        f"{stack.url('ingest')}/v1/admin/tenants/{tenant_id}/limits", json=body, headers=_admin(stack), timeout=10
    )
    assert response.status_code == 200, response.text
    limits: dict[str, object] = response.json()
    return limits


def metric(stack: LocalStack, service: str, name: str) -> float:
    text = httpx.get(f"{stack.url(service)}/metrics", timeout=10).text
    found = re.search(rf"^{name}(?:_total)? (\S+)$", text, re.MULTILINE)
    assert found, f"{name} is not in {service}'s metrics"
    return float(found.group(1))


def wait_for_limits(recall: httpx.Client, wanted: Callable[[dict[str, Any]], bool]) -> None:
    """Until this recall replica holds the tenant to the limits just set (each replica reads them anew every
    CAIRN_LIMITS_LIMITS_CACHE_S, 2 s): asked of `GET /v1/usage`, counted in the admin class, not the one tested."""
    deadline, limits = time.monotonic() + 15, None
    while time.monotonic() < deadline:
        limits = recall.get("/v1/usage").json()["limits"]
        if wanted(limits):
            return
        time.sleep(0.2)
    raise AssertionError(f"the replica still holds the tenant to {limits}")


def _rate_headers(response: httpx.Response) -> dict[str, str]:
    return {name: response.headers[name] for name in ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset")}


async def _add_key(stack: LocalStack, tenant_id: str) -> str:
    """Another key of the tenant, stored as `POST /v1/admin/tenants` stores the first (hash only)."""
    secret = f"ck_{secrets.token_urlsafe(24)}"
    conn = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        await conn.execute(
            "INSERT INTO ingest.api_keys (key_hash, tenant_id, key_prefix) VALUES ($1, $2, $3)",
            hashlib.sha256(secret.encode()).digest(), uuid.UUID(tenant_id), secret[:8],
        )  # fmt: skip
    finally:
        await conn.close()
    return secret


def test_every_counted_answer_carries_the_headers_of_its_class(tenant: Tenant) -> None:
    said = tenant.ingest.post("/v1/messages", json={"text": "hello"})
    assert said.status_code == 202
    headers = _rate_headers(said)
    assert float(headers["RateLimit-Limit"]) == 5000  # the default write rate
    assert int(headers["RateLimit-Remaining"]) > 0
    searched = tenant.recall.post("/v1/sessions/search", json={"query": "hello"})
    assert searched.status_code == 200
    assert float(_rate_headers(searched)["RateLimit-Limit"]) == 5000  # the default search rate


def test_past_the_rate_429_with_retry_after_counted_across_two_recall_replicas(
    services: LocalStack, tenant: Tenant
) -> None:
    limits = put_limits(services, tenant.tenant_id, {"requests_per_s": {"search": SLOW}})
    assert limits["requests_per_s"] == {"write": 5000, "search": SLOW, "recall": 2000, "admin": 100}
    replica = services.add_replica("recall")
    services.start_service(replica)
    try:
        services.wait_ready(replica)
        second = httpx.Client(base_url=services.url(replica), headers=tenant.recall.headers, timeout=30)
        for client in (tenant.recall, second):
            wait_for_limits(client, lambda limits: limits["requests_per_s"]["search"] == SLOW)
        first = tenant.recall.get("/v1/sessions")
        assert first.status_code == 200, first.text
        assert _rate_headers(first)["RateLimit-Remaining"] == "0"
        for client in (second, tenant.recall, second):
            refused = client.get("/v1/sessions")
            assert refused.status_code == 429, refused.text
            assert refused.headers["content-type"] == "application/problem+json"
            assert 1 <= int(refused.headers["Retry-After"]) <= 20
            assert float(refused.headers["RateLimit-Limit"]) == SLOW
            assert "search requests per second of the tenant" in refused.json()["detail"]
        assert tenant.recall.post("/v1/recall", json={"text": "x", "session_key": "agent:main:main"}).status_code != 429
        second.close()
    finally:
        services.kill_service(replica)


def test_a_keys_rate_binds_before_its_tenants(services: LocalStack, tenant: Tenant) -> None:
    # the tenant may send 2 writes per 200 s, each key 1
    put_limits(
        services,
        tenant.tenant_id,
        {"requests_per_s": {"write": 0.01}, "key_requests_per_s": {"write": 0.005}, "burst_s": 200},
    )
    keys = [tenant.ingest.headers["Authorization"].removeprefix("Bearer ")]
    keys += [asyncio.run(_add_key(services, tenant.tenant_id)) for _ in range(2)]
    clients = [httpx.Client(base_url=services.url("ingest"), headers={"Authorization": f"Bearer {k}"}) for k in keys]
    try:
        assert clients[0].post("/v1/messages", json={"text": "a1"}).status_code == 202
        by_key = clients[0].post("/v1/messages", json={"text": "a2"})
        assert by_key.status_code == 429
        assert "of this API key" in by_key.json()["detail"]
        assert clients[1].post("/v1/messages", json={"text": "b1"}).status_code == 202  # the tenant had one left
        by_tenant = clients[2].post("/v1/messages", json={"text": "c1"})
        assert by_tenant.status_code == 429
        assert "of the tenant" in by_tenant.json()["detail"]
        assert clients[2].get("/v1/agents/main/config").status_code == 200  # another class, its own rate
    finally:
        for client in clients:
            client.close()


def test_the_daily_message_quota_counts_batches_and_singles(services: LocalStack, tenant: Tenant) -> None:
    put_limits(services, tenant.tenant_id, {"messages_per_day": 3})
    batch = [{"text": f"m{i}", "message_id": f"q-{i}"} for i in range(2)]
    assert tenant.ingest.post("/v1/messages/batch", json={"messages": batch}).status_code == 202
    refused = tenant.ingest.post("/v1/messages/batch", json={"messages": batch})
    assert refused.status_code == 429, refused.text
    assert refused.json()["errors"] == [{"field": "messages_per_day", "message": "limit reached"}]
    assert int(refused.headers["Retry-After"]) >= 1
    assert "RateLimit-Limit" in refused.headers
    assert tenant.ingest.post("/v1/messages", json={"text": "third"}).status_code == 202
    assert tenant.ingest.post("/v1/messages", json={"text": "fourth"}).status_code == 429
    wait_for_limits(tenant.recall, lambda limits: limits["messages_per_day"]["limit"] == 3)
    usage = tenant.recall.get("/v1/usage")
    assert usage.status_code == 200, usage.text
    assert usage.json()["limits"]["messages_per_day"] == {"limit": 3, "used": 3}
    assert "total" in usage.json()  # the model usage report is still there


def test_stored_usage_and_documents_are_reported_and_held(services: LocalStack, tenant: Tenant) -> None:
    put_limits(services, tenant.tenant_id, {"memory_documents": 1})
    written = tenant.ingest.put("/v1/memory/files/memory/bank/a.md", json={"text": "the first document"})
    assert written.status_code in (200, 201), written.text
    deadline = time.monotonic() + 60
    refused = None
    while time.monotonic() < deadline:  # the count is read anew behind the requests (CAIRN_LIMITS_USAGE_CACHE_S)
        refused = tenant.ingest.put("/v1/memory/files/memory/bank/b.md", json={"text": "another"})
        if refused.status_code == 429:
            break
        time.sleep(1)
    assert refused is not None
    assert refused.status_code == 429, refused.text
    assert refused.json()["errors"][0]["field"] == "memory_documents"
    wait_for_limits(tenant.recall, lambda limits: limits["memory_documents"]["limit"] == 1)
    limits = tenant.recall.get("/v1/usage").json()["limits"]
    assert limits["stored_bytes"]["used"] >= len("the first document")


def test_limits_set_through_the_admin_api_reach_a_replica_that_counted_before(
    services: LocalStack, tenant: Tenant
) -> None:
    assert float(tenant.recall.get("/v1/sessions").headers["RateLimit-Limit"]) == 5000
    put_limits(services, tenant.tenant_id, {"requests_per_s": {"search": SLOW}})
    got = httpx.get(
        f"{services.url('ingest')}/v1/admin/tenants/{tenant.tenant_id}/limits", headers=_admin(services), timeout=10
    )
    assert got.json()["requests_per_s"]["search"] == SLOW
    deadline, answered = time.monotonic() + 15, None
    while time.monotonic() < deadline:  # the replica read the defaults; its cache holds them for 2 s
        answered = tenant.recall.get("/v1/sessions")
        if float(answered.headers["RateLimit-Limit"]) == SLOW:
            break
        time.sleep(0.2)
    assert answered is not None
    assert float(answered.headers["RateLimit-Limit"]) == SLOW
    assert tenant.recall.get("/v1/sessions").status_code == 429


@pytest.fixture
def other_address(services: LocalStack) -> Iterator[httpx.Client]:
    """A client from an address of its own (any 127.x.y.z is this host), so that the throttle it earns does not
    reach the other tests' clients."""
    address = f"127.{secrets.randbelow(200) + 20}.{secrets.randbelow(250) + 1}.{secrets.randbelow(250) + 1}"
    transport = httpx.HTTPTransport(local_address=address)
    with httpx.Client(base_url=services.url("ingest"), transport=transport, timeout=30) as client:
        yield client


def test_invalid_keys_from_one_address_are_throttled_without_a_lookup_each(
    services: LocalStack, other_address: httpx.Client, tenant: Tenant
) -> None:
    lookups = metric(services, "ingest", "cairn_auth_invalid_key_lookups")
    statuses = []
    for _ in range(150):
        headers = {"Authorization": f"Bearer ck_{secrets.token_urlsafe(24)}"}
        statuses.append(other_address.post("/v1/messages", json={"text": "x"}, headers=headers).status_code)
    assert set(statuses) == {401, 429}
    throttled = statuses.count(429)
    assert throttled >= 50, statuses
    looked_up = metric(services, "ingest", "cairn_auth_invalid_key_lookups") - lookups
    assert looked_up <= 150 - throttled  # a throttled key is never looked up
    assert metric(services, "ingest", "cairn_auth_throttled") >= throttled
    # the same invalid key again is answered from the invalid-key cache (no lookup)
    lookups = metric(services, "ingest", "cairn_auth_invalid_key_lookups")
    again = {"Authorization": "Bearer ck_the-same-wrong-key"}
    assert httpx.post(f"{services.url('ingest')}/v1/messages", json={"text": "x"}, headers=again).status_code == 401
    assert httpx.post(f"{services.url('ingest')}/v1/messages", json={"text": "x"}, headers=again).status_code == 401
    assert metric(services, "ingest", "cairn_auth_invalid_key_lookups") - lookups == 1
    # other addresses are not throttled
    assert tenant.ingest.post("/v1/messages", json={"text": "still served"}).status_code == 202


def test_with_redis_away_requests_are_served_uncounted(services: LocalStack, tenant: Tenant) -> None:
    put_limits(services, tenant.tenant_id, {"requests_per_s": {"write": SLOW}})
    assert tenant.ingest.post("/v1/messages", json={"text": "first"}).status_code == 202
    assert tenant.ingest.post("/v1/messages", json={"text": "second"}).status_code == 429
    failed_open = metric(services, "ingest", "cairn_rate_limit_fail_open")
    services.stop_redis()
    try:
        for i in range(3):
            said = tenant.ingest.post("/v1/messages", json={"text": f"while redis is away {i}"})
            assert said.status_code == 202, said.text
            assert float(said.headers["RateLimit-Limit"]) == SLOW
        assert tenant.recall.post("/v1/sessions/search", json={"query": "away"}).status_code == 200
        assert metric(services, "ingest", "cairn_rate_limit_fail_open") >= failed_open + 3
    finally:
        services.start_servers()


def test_past_its_stored_bytes_a_tenant_may_still_delete(services: LocalStack, tenant: Tenant) -> None:
    put_limits(services, tenant.tenant_id, {"stored_bytes": 10})
    assert tenant.ingest.post("/v1/messages", json={"text": "twenty bytes of text"}).status_code == 202
    deadline, refused = time.monotonic() + 60, None
    while time.monotonic() < deadline:  # once the message is stored and counted anew (behind the requests)
        refused = tenant.ingest.post("/v1/messages", json={"text": "more"})
        if refused.status_code == 429:
            break
        time.sleep(0.5)
    assert refused is not None
    assert refused.status_code == 429, refused.text
    assert refused.json()["errors"] == [{"field": "stored_bytes", "message": "limit reached"}]
    assert tenant.ingest.delete("/v1/memory/files/memory/bank/gone.md").status_code != 429
    wait_for_limits(tenant.recall, lambda limits: limits["stored_bytes"]["limit"] == 10)
    assert tenant.recall.get("/v1/usage").json()["limits"]["stored_bytes"]["used"] >= 20


def test_guessing_the_admin_token_is_throttled_per_address(services: LocalStack, other_address: httpx.Client) -> None:
    """The admin API is not rate-limited, but a wrong admin token is a failed login like an invalid key: past the
    address's failures it is answered 429 before the token is even compared, the right one included."""
    statuses = []
    for _ in range(80):
        wrong = {"Authorization": f"Bearer adm_{secrets.token_urlsafe(24)}"}
        statuses.append(other_address.get("/v1/admin/audit", headers=wrong).status_code)
    assert set(statuses) == {401, 429}
    first = statuses.index(429)
    assert first > 0, "the first wrong tokens are answered 401"
    assert statuses[first:] == [429] * (80 - first), "once throttled, every try is 429"
    right = {"Authorization": f"Bearer {services.state.admin_token}"}
    assert other_address.get("/v1/admin/audit", headers=right).status_code == 429
    assert httpx.get(f"{services.url('ingest')}/v1/admin/audit", headers=right).status_code == 200  # another address
