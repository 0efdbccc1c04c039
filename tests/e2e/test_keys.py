"""Key lifecycle and scopes over the real services: keys created, listed, revoked and rotated by the operator and
by a tenant's admin key; a revoked key refused by ingest and recall within a second; scopes and agent limits on
both doors; the audit log of every such action, closed to tenant keys."""

import datetime
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from cairn.local import LocalStack
from tests.conftest import Tenant

pytestmark = pytest.mark.e2e
REVOKED_WITHIN_S = 1.0  # the contract: a revoked key stops working on every replica of every service within 1 s


@pytest.fixture
def admin(services: LocalStack) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {services.state.admin_token}"}
    with httpx.Client(base_url=services.url("ingest"), headers=headers, timeout=30) as client:
        yield client


class KeyClients:
    """One key's clients of both doors."""

    def __init__(self, stack: LocalStack, created: dict[str, Any]) -> None:
        self.created = created
        headers = {"Authorization": f"Bearer {created['api_key']}"}
        self.ingest = httpx.Client(base_url=stack.url("ingest"), headers=headers, timeout=30)
        self.recall = httpx.Client(base_url=stack.url("recall"), headers=headers, timeout=30)

    def say(self, text: str, **fields: object) -> httpx.Response:
        return self.ingest.post("/v1/messages", json={"text": text, **fields})

    def search(self, query: str, **fields: object) -> httpx.Response:
        return self.recall.post("/v1/sessions/search", json={"query": query, **fields})


@pytest.fixture
def new_key(services: LocalStack, admin: httpx.Client, tenant: Tenant) -> Iterator[Callable[..., KeyClients]]:
    made: list[KeyClients] = []

    def make(**body: Any) -> KeyClients:
        created = admin.post(f"/v1/admin/tenants/{tenant.tenant_id}/keys", json={"name": "k", **body})
        assert created.status_code == 201, created.text
        made.append(KeyClients(services, created.json()))
        return made[-1]

    yield make
    for clients in made:
        clients.ingest.close()
        clients.recall.close()


def _forbidden(response: httpx.Response, naming: str) -> None:
    assert response.status_code == 403, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert naming in response.json()["detail"]


def _until(check: Callable[[], bool], bound_s: float, started: float | None = None) -> float:
    """Seconds from `started` until `check` holds; fails once `bound_s` has passed (the last try starts before)."""
    started = time.monotonic() if started is None else started
    while True:
        attempt = time.monotonic()
        if check():
            return time.monotonic() - started
        assert attempt - started < bound_s, f"still not so after {bound_s} s"
        time.sleep(0.02)


def test_a_revoked_key_is_refused_by_ingest_and_recall_within_a_second(
    admin: httpx.Client, tenant: Tenant, new_key: Callable[..., KeyClients]
) -> None:
    key = new_key(scopes=["write", "read"])
    assert key.say("before the revocation", message_id="r1").status_code == 202
    assert key.search("revocation").status_code == 200  # both doors now hold the key in their caches
    revoked = admin.delete(f"/v1/admin/tenants/{tenant.tenant_id}/keys/{key.created['key_id']}")
    assert revoked.status_code == 204
    since_204 = time.monotonic()
    _until(lambda: key.say("after", message_id="r2").status_code == 401, REVOKED_WITHIN_S, since_204)
    _until(lambda: key.search("after").status_code == 401, REVOKED_WITHIN_S, since_204)
    assert tenant.search("revocation")["results"] is not None  # the tenant's other key is untouched
    listed = admin.get(f"/v1/admin/tenants/{tenant.tenant_id}/keys").json()["keys"]
    assert [k["revoked_at"] is not None for k in listed if k["key_id"] == key.created["key_id"]] == [True]


def test_each_scope_opens_its_own_routes_only(new_key: Callable[..., KeyClients]) -> None:
    writer, reader, memory = new_key(scopes=["write"]), new_key(scopes=["read"]), new_key(scopes=["memory:write"])
    written = writer.say("a scoped zebra", message_id="s1")
    assert written.status_code == 202
    _forbidden(writer.search("zebra"), "'read'")
    _forbidden(writer.recall.get("/v1/sessions/agent:main:main/history"), "'read'")
    _forbidden(writer.ingest.put("/v1/memory/files/MEMORY.md", json={"text": "x"}), "'memory:write'")
    _forbidden(reader.say("no", message_id="s2"), "'write'")
    _forbidden(reader.ingest.post("/v1/messages/batch", json={"messages": [{"text": "no"}]}), "'write'")
    _forbidden(reader.ingest.post("/v1/keys", json={"name": "more"}), "'admin'")
    _forbidden(reader.ingest.put("/v1/agents/main/config", json={"sessions_visibility": "all"}), "'admin'")
    found = reader.search("zebra", consistent_with=written.json()["position"])
    assert found.status_code == 200
    assert [r["message_id"] for r in found.json()["results"]] == ["s1"]
    assert memory.ingest.put("/v1/memory/files/MEMORY.md", json={"text": "a note"}).status_code in (200, 201)
    _forbidden(memory.say("no", message_id="s3"), "'write'")


def test_the_key_of_a_new_tenant_has_every_scope(admin: httpx.Client, tenant: Tenant) -> None:
    listed = admin.get(f"/v1/admin/tenants/{tenant.tenant_id}/keys")
    assert listed.status_code == 200
    [first] = listed.json()["keys"]
    assert sorted(first["scopes"]) == ["admin", "memory:write", "read", "write"]
    assert first["agents"] is None
    assert tenant.ingest.get("/v1/keys").status_code == 200


def test_a_key_limited_to_agents_is_refused_for_any_other(new_key: Callable[..., KeyClients]) -> None:
    key = new_key(scopes=["write", "read"], agents=["helper"])
    _forbidden(key.say("main is not mine", message_id="a1"), "main")  # agent_id defaults to main
    _forbidden(key.say("nor this", message_id="a2", agent_id="other"), "other")
    batch = {"messages": [{"text": "ok", "agent_id": "helper"}, {"text": "not ok"}]}
    _forbidden(key.ingest.post("/v1/messages/batch", json=batch), "main")
    _forbidden(key.search("zebra"), "main")
    _forbidden(key.recall.get("/v1/sessions/agent:main:main/history"), "main")
    _forbidden(key.recall.get("/v1/memory/files", params={"agent_id": "main"}), "main")
    said = key.say("a helper zebra", message_id="a3", agent_id="helper")
    assert said.status_code == 202
    found = key.search("zebra", agent_id="helper", consistent_with=said.json()["position"])
    assert found.status_code == 200
    assert [r["message_id"] for r in found.json()["results"]] == ["a3"]


def test_a_rotated_key_works_through_its_grace_period_and_not_after(
    admin: httpx.Client, tenant: Tenant, new_key: Callable[..., KeyClients], services: LocalStack
) -> None:
    old = new_key(scopes=["write", "read"], agents=["main"])
    path = f"/v1/admin/tenants/{tenant.tenant_id}/keys/{old.created['key_id']}/rotate"
    rotated = admin.post(path, json={"grace_s": 3})
    assert rotated.status_code == 201, rotated.text
    body = rotated.json()
    assert body["key_id"] != old.created["key_id"]
    assert body["api_key"] != old.created["api_key"]
    assert body["api_key"].startswith(body["prefix"])
    assert (body["scopes"], body["agents"]) == (["read", "write"], ["main"])
    new = KeyClients(services, body)
    assert old.say("still mine", message_id="g1").status_code == 202  # within the grace period
    assert new.say("mine now", message_id="g2").status_code == 202
    _until(lambda: old.say("too late", message_id="g3").status_code == 401, 3 + 5)
    assert old.search("late").status_code == 401
    assert new.search("mine").status_code == 200
    assert admin.post(path, json={"grace_s": 0}).status_code == 404  # a key that ended cannot be rotated
    too_long = admin.post(f"/v1/admin/tenants/{tenant.tenant_id}/keys/{body['key_id']}/rotate",
                          json={"grace_s": 10**9})  # fmt: skip
    assert too_long.status_code == 422
    new.ingest.close()
    new.recall.close()


def test_a_key_stops_at_its_expiry(new_key: Callable[..., KeyClients]) -> None:
    ends = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=2)
    key = new_key(scopes=["read"], expires_at=ends.isoformat())
    assert key.created["expires_at"] is not None
    assert key.search("anything").status_code == 200
    _until(lambda: key.search("anything").status_code == 401, 2 + 5)
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=1)
    with pytest.raises(AssertionError, match="422"):
        new_key(expires_at=past.isoformat())


def test_a_tenant_manages_its_own_keys_with_its_admin_key_and_never_beyond_it(
    tenant: Tenant, other_tenant: Tenant, new_key: Callable[..., KeyClients], services: LocalStack
) -> None:
    created = tenant.ingest.post("/v1/keys", json={"name": "adapter", "scopes": ["write"]})
    assert created.status_code == 201, created.text
    body = created.json()
    assert set(body) >= {"key_id", "api_key", "prefix", "scopes", "agents", "expires_at"}
    assert body["api_key"].startswith(body["prefix"])
    assert len(body["prefix"]) < len(body["api_key"])
    adapter = KeyClients(services, body)
    assert adapter.say("from the adapter", message_id="o1").status_code == 202
    listed = {k["key_id"]: k for k in tenant.ingest.get("/v1/keys").json()["keys"]}
    assert listed[body["key_id"]]["prefix"] == body["prefix"]
    assert listed[body["key_id"]]["last_used_at"] is not None
    assert all("api_key" not in k for k in listed.values())
    assert body["key_id"] not in {k["key_id"] for k in other_tenant.ingest.get("/v1/keys").json()["keys"]}
    assert other_tenant.ingest.delete(f"/v1/keys/{body['key_id']}").status_code == 404
    rotated = tenant.ingest.post(f"/v1/keys/{body['key_id']}/rotate", json={"grace_s": 0})
    assert rotated.status_code == 201
    _until(lambda: adapter.say("old", message_id="o2").status_code == 401, REVOKED_WITHIN_S)
    assert tenant.ingest.delete(f"/v1/keys/{rotated.json()['key_id']}").status_code == 204
    # a key with the admin scope but not every scope hands out nothing beyond its own
    limited = new_key(scopes=["admin", "read"], agents=["main"])
    _forbidden(limited.ingest.post("/v1/keys", json={"name": "w", "scopes": ["write"]}), "write")
    _forbidden(limited.ingest.post("/v1/keys", json={"name": "r", "scopes": ["read"]}), "agents")
    narrow = {"name": "r", "scopes": ["read"], "agents": ["main"]}
    assert limited.ingest.post("/v1/keys", json=narrow).status_code == 201
    adapter.ingest.close()
    adapter.recall.close()


def test_every_key_action_is_audited_and_the_log_is_the_operators_only(
    admin: httpx.Client, tenant: Tenant, new_key: Callable[..., KeyClients]
) -> None:
    key = new_key(scopes=["read"])
    key_id = key.created["key_id"]
    rotated = admin.post(f"/v1/admin/tenants/{tenant.tenant_id}/keys/{key_id}/rotate", json={"grace_s": 0})
    own = tenant.ingest.post("/v1/keys", json={"name": "own", "scopes": ["read"]}).json()
    assert tenant.ingest.delete(f"/v1/keys/{own['key_id']}").status_code == 204
    assert admin.delete(f"/v1/admin/tenants/{tenant.tenant_id}/keys/{rotated.json()['key_id']}").status_code == 204
    audit = admin.get("/v1/admin/audit", params={"tenant_id": tenant.tenant_id, "limit": 100})
    assert audit.status_code == 200, audit.text
    entries = audit.json()["entries"]
    assert all(set(e) == {"at", "actor", "tenant_id", "action", "target", "from"} for e in entries)
    assert {e["tenant_id"] for e in entries} == {tenant.tenant_id}
    assert all(e["from"] == "127.0.0.1" for e in entries)
    tenant_key_id = next(k["key_id"] for k in admin.get(f"/v1/admin/tenants/{tenant.tenant_id}/keys").json()["keys"]
                         if k["name"] == "default")  # fmt: skip
    actions = [(e["actor"], e["action"]) for e in entries]
    assert actions == [
        ("admin", "tenant.create"),
        ("admin", "key.create"),
        ("admin", "key.rotate"),
        (f"key:{tenant_key_id}", "key.create"),
        (f"key:{tenant_key_id}", "key.revoke"),
        ("admin", "key.revoke"),
    ]
    assert entries[2]["target"].startswith(f"key:{key_id}->key:{rotated.json()['key_id']}")
    later = admin.get("/v1/admin/audit", params={"tenant_id": tenant.tenant_id, "since": entries[3]["at"]})
    assert [e["action"] for e in later.json()["entries"]] == ["key.create", "key.revoke", "key.revoke"]
    assert tenant.ingest.get("/v1/admin/audit").status_code == 403
    assert tenant.ingest.get("/v1/admin/audit", headers={"Authorization": "Bearer ck_nope"}).status_code == 401
    assert httpx.get(f"{tenant.ingest.base_url}/v1/admin/audit").status_code == 401
