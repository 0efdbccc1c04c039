"""A tenant's API keys: created with a name, scopes, optionally agents and an expiry; listed; revoked;
rotated (a new key like the old one, the old one valid for a grace period). Each change is written in the
tenant's transaction with its audit entry; announcing it to the other replicas is the caller's (after commit).
"""

import datetime
import uuid
from dataclasses import dataclass

import asyncpg

from cairn.ingest import audit
from cairn.ingest.audit import Actor
from cairn.ingest.domain import NewKey
from cairn.storage.postgres import tenant_transaction

KEY_COLUMNS = "key_id, name, key_prefix, scopes, agents, created_at, last_used_at, expires_at, revoked_at"
CREATE_KEY = f"""
INSERT INTO ingest.api_keys (key_hash, tenant_id, key_prefix, key_id, name, scopes, agents, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING {KEY_COLUMNS}
"""
LIST_KEYS = f"SELECT {KEY_COLUMNS} FROM ingest.api_keys WHERE tenant_id = $1 ORDER BY created_at, key_id"
GET_KEY = f"SELECT {KEY_COLUMNS} FROM ingest.api_keys WHERE tenant_id = $1 AND key_id = $2"
# A key that still works, locked so a concurrent rotation or revocation waits for this one.
LOCK_LIVE_KEY = f"""
SELECT {KEY_COLUMNS} FROM ingest.api_keys
WHERE tenant_id = $1 AND key_id = $2 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
FOR UPDATE
"""
REVOKE_KEY = """
UPDATE ingest.api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE tenant_id = $1 AND key_id = $2
RETURNING key_id
"""
# The rotated key ends at the end of the grace period, or earlier if it was to expire before.
END_AFTER_GRACE = """
UPDATE ingest.api_keys SET expires_at = least(coalesce(expires_at, 'infinity'), now() + make_interval(secs => $3))
WHERE tenant_id = $1 AND key_id = $2
"""


@dataclass(frozen=True)
class StoredKey:
    key_id: str
    name: str
    prefix: str
    scopes: list[str]
    agents: list[str] | None
    created_at: datetime.datetime
    last_used_at: datetime.datetime | None
    expires_at: datetime.datetime | None
    revoked_at: datetime.datetime | None


@dataclass(frozen=True)
class KeySpec:
    name: str
    scopes: list[str]
    agents: list[str] | None
    expires_at: datetime.datetime | None


class UnknownKey(Exception):
    """No such key in the tenant (or, to rotate, none that still works)."""


def _stored(row: "asyncpg.Record") -> StoredKey:
    return StoredKey(
        key_id=str(row["key_id"]),
        name=row["name"],
        prefix=row["key_prefix"],
        scopes=list(row["scopes"]),
        agents=None if row["agents"] is None else list(row["agents"]),
        created_at=row["created_at"],
        last_used_at=row["last_used_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
    )


def _spec(key: StoredKey) -> KeySpec:
    return KeySpec(key.name, key.scopes, key.agents, key.expires_at)


class KeyStore:
    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]") -> None:
        self._pool = pool

    async def create(self, tenant: str, spec: KeySpec, secret: NewKey, actor: Actor) -> StoredKey:
        async with tenant_transaction(self._pool, tenant) as conn:
            row = await conn.fetchrow(CREATE_KEY, secret.digest, uuid.UUID(tenant), secret.prefix, uuid.uuid4(),
                                      spec.name, spec.scopes, spec.agents, spec.expires_at)  # fmt: skip
            assert row is not None
            key = _stored(row)
            await audit.record(conn, actor, tenant, "key.create", f"key:{key.key_id}")
        return key

    async def list(self, tenant: str) -> list[StoredKey]:
        async with tenant_transaction(self._pool, tenant) as conn:
            return [_stored(r) for r in await conn.fetch(LIST_KEYS, uuid.UUID(tenant))]

    async def get(self, tenant: str, key_id: uuid.UUID) -> StoredKey:
        async with tenant_transaction(self._pool, tenant) as conn:
            row = await conn.fetchrow(GET_KEY, uuid.UUID(tenant), key_id)
        if row is None:
            raise UnknownKey(str(key_id))
        return _stored(row)

    async def revoke(self, tenant: str, key_id: uuid.UUID, actor: Actor) -> None:
        """Revoke the key (again: a no-op that is still logged); `UnknownKey` if the tenant has no such key."""
        async with tenant_transaction(self._pool, tenant) as conn:
            if await conn.fetchval(REVOKE_KEY, uuid.UUID(tenant), key_id) is None:
                raise UnknownKey(str(key_id))
            await audit.record(conn, actor, tenant, "key.revoke", f"key:{key_id}")

    async def rotate(
        self, tenant: str, key_id: uuid.UUID, grace_s: int, secret: NewKey, actor: Actor
    ) -> tuple[StoredKey, StoredKey]:
        """The rotated key (as it was) and its successor, with the same name, scopes, agents and expiry."""
        async with tenant_transaction(self._pool, tenant) as conn:
            row = await conn.fetchrow(LOCK_LIVE_KEY, uuid.UUID(tenant), key_id)
            if row is None:
                raise UnknownKey(str(key_id))
            old = _stored(row)
            spec = _spec(old)
            created = await conn.fetchrow(CREATE_KEY, secret.digest, uuid.UUID(tenant), secret.prefix, uuid.uuid4(),
                                          spec.name, spec.scopes, spec.agents, spec.expires_at)  # fmt: skip
            assert created is not None
            await conn.execute(END_AFTER_GRACE, uuid.UUID(tenant), key_id, float(grace_s))
            new = _stored(created)
            await audit.record(conn, actor, tenant, "key.rotate", f"key:{key_id}->key:{new.key_id} grace_s={grace_s}")
        return old, new
