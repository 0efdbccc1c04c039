"""What a process keeps of a key, against the real Postgres and Redis: a grant with its tenant, scopes and agents;
forgotten at once when a revocation is announced on Redis; and, with no Redis to listen to, kept only the short
fallback time, so a revoked key still stops within about a second."""

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from cairn.edge.auth import ApiKeys
from cairn.edge.key_revocations import RevocationListener, announce
from cairn.ingest.domain import NewKey, new_api_key
from cairn.local import LocalStack
from cairn.local.processes import free_port
from cairn.platform.runtime import redis_client
from tests.integration.conftest import eventually


async def _tenant_with_key(pool: "asyncpg.Pool[asyncpg.Record]") -> tuple[str, NewKey]:
    tenant, key = uuid.uuid4(), new_api_key()
    async with pool.acquire() as conn:
        await conn.fetchval("SELECT ingest.create_tenant($1, $2, $3, $4)", tenant, "acme", key.digest, key.prefix)
    return str(tenant), key


async def _revoke_behind_its_back(admin: "asyncpg.Connection[asyncpg.Record]", key: NewKey) -> str:
    """Revoked in the database only: what a process kept still says the key works until it forgets it."""
    key_id = await admin.fetchval(
        "UPDATE ingest.api_keys SET revoked_at = now() WHERE key_hash = $1 RETURNING key_id", key.digest
    )
    return str(key_id)


@pytest.fixture
async def listening(stack: LocalStack, app_pool: "asyncpg.Pool[asyncpg.Record]") -> AsyncIterator[ApiKeys]:
    keys, redis = ApiKeys(app_pool), redis_client(stack.redis_url)
    task = asyncio.create_task(RevocationListener(redis, keys).run())
    try:
        assert await eventually(lambda: _is(keys.listening))
        yield keys
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await redis.aclose()


async def _is(value: bool) -> bool:
    return value


async def test_a_new_tenants_key_has_every_scope_and_every_agent(app_pool: "asyncpg.Pool[asyncpg.Record]") -> None:
    tenant, key = await _tenant_with_key(app_pool)
    grant = await ApiKeys(app_pool).key_for(key.secret)
    assert grant is not None
    assert grant.tenant == tenant
    assert grant.scopes == {"write", "read", "memory:write", "admin"}
    assert grant.agents is None
    assert await ApiKeys(app_pool).key_for("ck_not-a-key") is None


async def test_an_announced_revocation_is_forgotten_at_once(
    stack: LocalStack,
    listening: ApiKeys,
    app_pool: "asyncpg.Pool[asyncpg.Record]",
    admin: "asyncpg.Connection[asyncpg.Record]",
) -> None:
    _, key = await _tenant_with_key(app_pool)
    assert await listening.key_for(key.secret) is not None  # kept for the long time: the process listens
    key_id = await _revoke_behind_its_back(admin, key)
    assert await listening.key_for(key.secret) is not None, "kept: nobody announced the revocation yet"
    redis = redis_client(stack.redis_url)
    try:
        await announce(redis, key_id)
    finally:
        await redis.aclose()
    assert await eventually(lambda: _gone(listening, key), within=1.0)


async def _gone(keys: ApiKeys, key: NewKey) -> bool:
    return await keys.key_for(key.secret) is None


async def test_without_redis_a_key_is_kept_only_the_fallback_time(
    app_pool: "asyncpg.Pool[asyncpg.Record]", admin: "asyncpg.Connection[asyncpg.Record]"
) -> None:
    keys, nowhere = ApiKeys(app_pool), redis_client(f"redis://127.0.0.1:{free_port()}/0")
    task = asyncio.create_task(RevocationListener(nowhere, keys, retry_s=0.1).run())
    try:
        _, key = await _tenant_with_key(app_pool)
        assert await keys.key_for(key.secret) is not None
        assert keys.listening is False
        await _revoke_behind_its_back(admin, key)
        # the fallback cache time (1 s) plus the bounded wait's slack for a loaded machine
        assert await eventually(lambda: _gone(keys, key), within=1.0 + 2.0)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await nowhere.aclose()


async def test_last_use_is_written_once_a_minute_per_key_not_per_request(
    app_pool: "asyncpg.Pool[asyncpg.Record]", admin: "asyncpg.Connection[asyncpg.Record]"
) -> None:
    keys = ApiKeys(app_pool)
    _, key = await _tenant_with_key(app_pool)
    last_used = "SELECT last_used_at FROM ingest.api_keys WHERE key_hash = $1"
    assert await admin.fetchval(last_used, key.digest) is None
    assert await keys.key_for(key.secret) is not None
    assert await admin.fetchval(last_used, key.digest) is not None  # the first use is written
    await admin.execute("UPDATE ingest.api_keys SET last_used_at = NULL WHERE key_hash = $1", key.digest)
    for _ in range(20):
        assert await keys.key_for(key.secret) is not None
    assert await admin.fetchval(last_used, key.digest) is None, "no write for the uses within the minute"
