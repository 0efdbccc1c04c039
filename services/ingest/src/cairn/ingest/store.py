"""Tenants and their first API key. Creation goes through a SECURITY DEFINER function: the tenant does
not exist yet, so row-level security has nothing to admit it by."""

import uuid

import asyncpg

from cairn.ingest.domain import NewKey

CREATE_TENANT = "SELECT ingest.create_tenant($1, $2, $3, $4)"


class TenantStore:
    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]") -> None:
        self._pool = pool

    async def create_tenant(self, name: str, key: NewKey) -> str:
        tenant_id = uuid.uuid4()
        async with self._pool.acquire() as conn:
            await conn.fetchval(CREATE_TENANT, tenant_id, name, key.digest, key.prefix)
        return str(tenant_id)
