"""Tenant isolation in the database: row-level security as seen by the service role `cairn_app`, the
role's lack of any way around it, idempotent migrations, and the cross-tenant doors: API keys, and the
projection role `cairn_projector`, which may open a transaction over a set of tenants on the tables
projections write (and only there, and only that role)."""

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import TypeAlias

import asyncpg
import pytest

from cairn.edge.auth import ApiKeys, hash_key
from cairn.ingest.domain import new_api_key
from cairn.local import LocalStack
from cairn.local.processes import free_port
from cairn.local.stack import OWNER
from cairn.storage.migrations import apply_migrations, available_schema
from cairn.storage.postgres import is_projector, tenant_transaction, tenants_transaction

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
Admin: TypeAlias = "asyncpg.Connection[asyncpg.Record]"

INSERT_SESSION = """
INSERT INTO session.sessions (tenant_id, agent_id, session_key, session_id, chat_type, channel)
VALUES ($1, 'main', $2, $3, 'direct', 'telegram')
"""
SESSION_KEYS = "SELECT session_key FROM session.sessions ORDER BY session_key"
TENANT_TABLES = """
SELECT n.nspname || '.' || c.relname AS name, c.relrowsecurity, c.relforcerowsecurity,
       pg_get_userbyid(c.relowner) AS owner
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname IN ('cairn', 'ingest', 'session', 'indexer', 'consolidation')
  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped)
ORDER BY name
"""
BATCH_POLICIES = """
SELECT schemaname || '.' || tablename AS name, roles::text[] AS roles FROM pg_policies
WHERE policyname = 'tenant_batch' AND schemaname IN ('cairn', 'ingest', 'session', 'indexer', 'consolidation')
ORDER BY name
"""
LEDGER = """
SELECT owner, name, checksum, applied_at FROM cairn.schema_versions
UNION ALL SELECT owner, name, checksum, applied_at FROM cairn.schema_repeatables ORDER BY owner, name
"""


async def add_session(pool: Pool, tenant: str, key: str) -> None:
    async with tenant_transaction(pool, tenant) as conn:
        await conn.execute(INSERT_SESSION, uuid.UUID(tenant), key, uuid.uuid4())


async def visible_keys(pool: Pool, tenant: str) -> list[str]:
    async with tenant_transaction(pool, tenant) as conn:
        return [r["session_key"] for r in await conn.fetch(SESSION_KEYS)]


async def test_a_tenant_sees_only_its_own_rows(app_pool: Pool, admin: Admin) -> None:
    tenant_a, tenant_b = str(uuid.uuid4()), str(uuid.uuid4())
    await add_session(app_pool, tenant_a, "agent:main:main")
    await add_session(app_pool, tenant_a, "agent:main:telegram:direct:123")
    await add_session(app_pool, tenant_b, "agent:main:discord:direct:987")

    assert await visible_keys(app_pool, tenant_a) == ["agent:main:main", "agent:main:telegram:direct:123"]
    assert await visible_keys(app_pool, tenant_b) == ["agent:main:discord:direct:987"]
    async with tenant_transaction(app_pool, tenant_b) as conn:
        # Even asking for A's rows by id finds nothing, and changing them touches nothing.
        assert (
            await conn.fetchval("SELECT count(*) FROM session.sessions WHERE tenant_id = $1", uuid.UUID(tenant_a)) == 0
        )
        updated = await conn.execute(
            "UPDATE session.sessions SET status = 'x' WHERE tenant_id = $1", uuid.UUID(tenant_a)
        )
        assert updated == "UPDATE 0"
    # Not vacuous: the rows are there for someone who bypasses RLS.
    count = await admin.fetchval("SELECT count(*) FROM session.sessions WHERE tenant_id = $1", uuid.UUID(tenant_a))
    assert count == 2


async def test_writing_a_row_for_another_tenant_is_refused(app_pool: Pool, admin: Admin) -> None:
    tenant_a, tenant_b = str(uuid.uuid4()), str(uuid.uuid4())
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
        async with tenant_transaction(app_pool, tenant_b) as conn:
            await conn.execute(INSERT_SESSION, uuid.UUID(tenant_a), "agent:main:main", uuid.uuid4())
    assert await admin.fetchval("SELECT count(*) FROM session.sessions WHERE tenant_id = $1", uuid.UUID(tenant_a)) == 0


async def test_moving_a_row_to_another_tenant_is_refused(app_pool: Pool) -> None:
    tenant_a, tenant_b = str(uuid.uuid4()), str(uuid.uuid4())
    await add_session(app_pool, tenant_a, "agent:main:main")
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
        async with tenant_transaction(app_pool, tenant_a) as conn:
            await conn.execute("UPDATE session.sessions SET tenant_id = $1", uuid.UUID(tenant_b))
    assert await visible_keys(app_pool, tenant_a) == ["agent:main:main"]


async def test_without_a_tenant_nothing_is_visible(app_pool: Pool, stack: LocalStack) -> None:
    tenant = str(uuid.uuid4())
    await add_session(app_pool, tenant, "agent:main:main")
    # A pooled connection after a tenant transaction: the setting was transaction-local.
    async with app_pool.acquire() as conn:
        assert await conn.fetchval("SELECT cairn.current_tenant()") is None
        assert await conn.fetch(SESSION_KEYS) == []
    # A fresh connection that never set a tenant.
    fresh = await asyncpg.connect(stack.postgres_url())
    try:
        assert await fresh.fetch(SESSION_KEYS) == []
        assert await fresh.fetchval("SELECT count(*) FROM cairn.processed_events") == 0
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            await fresh.execute(INSERT_SESSION, uuid.UUID(tenant), "agent:main:other", uuid.uuid4())
    finally:
        await fresh.close()


async def test_the_service_role_cannot_switch_row_security_off(stack: LocalStack) -> None:
    conn = await asyncpg.connect(stack.postgres_url())
    try:
        await conn.execute("SET row_security = off")
        # With row_security off, a query that RLS would filter is an error rather than unfiltered.
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            await conn.fetch(SESSION_KEYS)
    finally:
        await conn.close()


async def test_the_service_role_is_not_superuser_does_not_bypass_rls_and_owns_nothing(admin: Admin) -> None:
    role = await admin.fetchrow(
        "SELECT rolsuper, rolbypassrls, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = 'cairn_app'"
    )
    assert role is not None
    assert dict(role) == {"rolsuper": False, "rolbypassrls": False, "rolcreaterole": False, "rolcreatedb": False}
    tables = await admin.fetch(TENANT_TABLES)
    assert len(tables) >= 10
    # API keys are looked up across tenants by owner-run functions: enabled for everyone else, not forced;
    # full-text matching of messages (0017) and of memory chunks (0031) runs as the owner so `@@` can use its
    # index (each function checks the caller's tenant itself); the memory worker's due sessions (0042) and
    # turns of another embedding model (0064) are found across tenants in one query, and the agents' remember
    # settings read with the due sessions (0096); the chunks' full-text keys are kept and read by owner triggers
    # and functions (0135), as are the exact scan's vector rows (memindex V0002; cairn_app reads them by policy);
    # due memory flushes are found across tenants by the flush worker's owner-run function (consolidation V0002),
    # and every tenant's limit overrides read at once by each process (platform V0003, cairn.all_tenant_limits)
    owner_readable = {
        "ingest.tenants", "ingest.api_keys", "ingest.audit_log", "indexer.messages", "indexer.memory_chunks",
        "indexer.memory_chunk_keys",
        "indexer.memory_pending", "indexer.memory_turns", "indexer.memory_agents", "indexer.memory_chunk_vectors",
        "consolidation.flushes_due", "cairn.tenant_limits",
    }  # fmt: skip
    unprotected = [t["name"] for t in tables if not t["relrowsecurity"]]
    unforced = {t["name"] for t in tables if not t["relforcerowsecurity"]}
    assert unprotected == [], "every table with a tenant_id must enable row-level security"
    assert unforced == owner_readable, "and force it, but where a SECURITY DEFINER lookup must cross tenants"
    assert [t["name"] for t in tables if t["owner"] == "cairn_app"] == []


async def test_migrate_is_idempotent(stack: LocalStack, admin: Admin) -> None:
    """Runs the real `cairn migrate` command again: nothing is applied twice, the ledger is unchanged."""
    before = [dict(r) for r in await admin.fetch(LEDGER)]
    await asyncio.to_thread(stack.migrate)
    after = [dict(r) for r in await admin.fetch(LEDGER)]
    assert after == before
    assert sorted((r["owner"], r["name"]) for r in before) == sorted((f.owner, f.name) for f in available_schema())


def test_migrate_without_a_reachable_nats_says_so_and_stops(stack: LocalStack) -> None:
    """A migration job pointed at no NATS must fail with a reason, not wait for it forever."""
    closed_port = free_port()
    env = {
        **os.environ,
        "CAIRN_POSTGRES_ADMIN_URL": stack.postgres_url(OWNER),
        "CAIRN_NATS_URL": f"nats://someone:s3cret@127.0.0.1:{closed_port}",
        "CAIRN_MIGRATE_NATS_WAIT_S": "1",
    }
    cli = Path(sys.executable).parent / "cairn"
    done = subprocess.run([str(cli), "migrate"], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode != 0
    assert "migrations applied: none" in done.stdout, "the database part still ran"
    assert f"could not reach NATS at 127.0.0.1:{closed_port}" in done.stderr
    assert "CAIRN_NATS_URL" in done.stderr
    assert "s3cret" not in done.stderr + done.stdout


async def test_applying_migrations_again_applies_none(stack: LocalStack) -> None:
    assert await apply_migrations(stack.postgres_url("postgres")) == []


async def test_authenticate_finds_a_key_created_with_its_tenant(app_pool: Pool) -> None:
    tenant, key = uuid.uuid4(), new_api_key()
    async with app_pool.acquire() as conn:
        created = await conn.fetchval(
            "SELECT ingest.create_tenant($1, $2, $3, $4)", tenant, "acme", key.digest, key.prefix
        )
        assert created == tenant
        assert await conn.fetchval("SELECT ingest.authenticate($1)", hash_key(key.secret)) == tenant
        assert await conn.fetchval("SELECT ingest.authenticate($1)", hash_key("ck_not-a-key")) is None
        # Outside the SECURITY DEFINER functions the key table is as closed as any other.
        assert await conn.fetchval("SELECT count(*) FROM ingest.api_keys") == 0
    assert await ApiKeys(app_pool).tenant_for(key.secret) == str(tenant)
    assert await ApiKeys(app_pool).tenant_for("ck_not-a-key") is None
    async with tenant_transaction(app_pool, str(tenant)) as conn:
        assert await conn.fetchval("SELECT key_prefix FROM ingest.api_keys") == key.prefix
    async with tenant_transaction(app_pool, str(uuid.uuid4())) as conn:
        assert await conn.fetchval("SELECT count(*) FROM ingest.api_keys WHERE key_hash = $1", key.digest) == 0


async def test_a_revoked_key_no_longer_authenticates(app_pool: Pool, admin: Admin) -> None:
    tenant, key = uuid.uuid4(), new_api_key()
    async with app_pool.acquire() as conn:
        await conn.fetchval("SELECT ingest.create_tenant($1, $2, $3, $4)", tenant, "acme", key.digest, key.prefix)
    await admin.execute("UPDATE ingest.api_keys SET revoked_at = now() WHERE key_hash = $1", key.digest)
    async with app_pool.acquire() as conn:
        assert await conn.fetchval("SELECT ingest.authenticate($1)", key.digest) is None


async def test_the_service_role_writes_keys_of_its_tenant_only(app_pool: Pool) -> None:
    """The key API writes a tenant's keys in that tenant's transaction: row-level security refuses a key of
    another tenant, and a key's scopes, once created, cannot be changed by the service role."""
    tenant, key = uuid.uuid4(), new_api_key()
    async with app_pool.acquire() as conn:
        await conn.fetchval("SELECT ingest.create_tenant($1, $2, $3, $4)", tenant, "acme", key.digest, key.prefix)
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
        async with tenant_transaction(app_pool, str(uuid.uuid4())) as conn:
            await conn.execute(
                "INSERT INTO ingest.api_keys (key_hash, tenant_id, key_prefix) VALUES ($1, $2, 'ck_x')",
                hash_key("ck_x"),
                tenant,
            )
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied"):
        async with tenant_transaction(app_pool, str(tenant)) as conn:
            await conn.execute("UPDATE ingest.api_keys SET scopes = '{admin}'")


async def test_the_audit_log_is_append_only_and_closed_to_the_service_role(app_pool: Pool) -> None:
    tenant = uuid.uuid4()
    async with tenant_transaction(app_pool, str(tenant)) as conn:
        await conn.execute(
            "INSERT INTO ingest.audit_log (actor, tenant_id, action) VALUES ('admin', $1, 'test.append')", tenant
        )
    for statement in ("SELECT count(*) FROM ingest.audit_log", "UPDATE ingest.audit_log SET action = 'x'",
                      "DELETE FROM ingest.audit_log"):  # fmt: skip
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied"):
            async with tenant_transaction(app_pool, str(tenant)) as conn:
                await conn.execute(statement)
    async with app_pool.acquire() as conn:
        rows = await conn.fetch("SELECT actor, action FROM ingest.audit_entries($1, NULL, 10)", tenant)
    assert [dict(r) for r in rows] == [{"actor": "admin", "action": "test.append"}]


async def test_a_tenant_set_admits_those_tenants_for_the_projector_role_only(
    app_pool: Pool, projector_pool: Pool
) -> None:
    a, b, c = (str(uuid.uuid4()) for _ in range(3))
    for tenant, key in ((a, "agent:main:a"), (b, "agent:main:b"), (c, "agent:main:c")):
        await add_session(app_pool, tenant, key)

    assert await is_projector(projector_pool)
    async with tenants_transaction(projector_pool, [a, b]) as conn:
        assert [r["session_key"] for r in await conn.fetch(SESSION_KEYS)] == ["agent:main:a", "agent:main:b"]
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
        async with tenants_transaction(projector_pool, [a, b]) as conn:
            await conn.execute(INSERT_SESSION, uuid.UUID(c), "agent:main:other", uuid.uuid4())
    # the projector's single-tenant transactions are as narrow as anyone's
    assert await visible_keys(projector_pool, a) == ["agent:main:a"]

    # The HTTP-facing role ignores a tenant set altogether: it sees nothing and may write nothing.
    assert not await is_projector(app_pool)
    async with tenants_transaction(app_pool, [a, b]) as conn:
        assert await conn.fetch(SESSION_KEYS) == []
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
        async with tenants_transaction(app_pool, [a, b]) as conn:
            await conn.execute(INSERT_SESSION, uuid.UUID(a), "agent:main:other", uuid.uuid4())
    # and with its own tenant set beside a stray set, it still sees only its own tenant
    async with tenant_transaction(app_pool, a) as conn:
        await conn.execute("SELECT set_config('cairn.tenant_ids', $1, true)", f"{a},{b},{c}")
        assert [r["session_key"] for r in await conn.fetch(SESSION_KEYS)] == ["agent:main:a"]


async def test_the_projector_role_crosses_tenants_only_on_the_tables_projections_write(admin: Admin) -> None:
    role = await admin.fetchrow(
        "SELECT rolsuper, rolbypassrls, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = 'cairn_projector'"
    )
    assert role is not None
    assert dict(role) == {"rolsuper": False, "rolbypassrls": False, "rolcreaterole": False, "rolcreatedb": False}
    assert await admin.fetchval("SELECT count(*) FROM pg_class WHERE relowner = 'cairn_projector'::regrole") == 0
    assert not await admin.fetchval("SELECT pg_has_role('cairn_app', 'cairn_projector', 'USAGE')")
    policies = {r["name"]: r["roles"] for r in await admin.fetch(BATCH_POLICIES)}
    tables = [r["name"] for r in await admin.fetch(TENANT_TABLES)]
    projected = [t for t in tables if t.split(".")[0] in ("cairn", "session", "indexer")]
    assert {"cairn.outbox", "session.entries", "indexer.messages", "indexer.memory_turns"} <= set(projected)
    assert sorted(policies) == projected, "the schemas of the session and indexer services, nothing else"
    assert set(map(tuple, policies.values())) == {("cairn_projector",)}
