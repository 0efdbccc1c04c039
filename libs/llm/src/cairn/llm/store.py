"""The platform's model tables (schema in libs/platform/.../V0002__tenant_models.sql): each tenant's override and
its token usage. Every statement runs in the tenant's own transaction, so row-level security admits only its rows."""

import datetime
from dataclasses import dataclass
from typing import Any

import asyncpg

from cairn.storage.postgres import tenant_transaction

GET_OVERRIDE = "SELECT base_url, model, api_key, updated_at FROM cairn.tenant_models WHERE tenant_id = $1"
PUT_OVERRIDE = """
INSERT INTO cairn.tenant_models (tenant_id, base_url, model, api_key) VALUES ($1, $2, $3, $4)
ON CONFLICT (tenant_id) DO UPDATE
SET base_url = excluded.base_url, model = excluded.model, api_key = excluded.api_key, updated_at = now()
RETURNING base_url, model, api_key, updated_at
"""
DELETE_OVERRIDE = "DELETE FROM cairn.tenant_models WHERE tenant_id = $1"
# The day is UTC's, whatever the session's time zone.
RECORD_USAGE = """
INSERT INTO cairn.model_usage AS u (tenant_id, day, purpose, model, calls, failures, prompt_tokens, completion_tokens)
VALUES ($1, (now() AT TIME ZONE 'UTC')::date, $2, $3, 1, $4, $5, $6)
ON CONFLICT (tenant_id, day, purpose, model) DO UPDATE
SET calls = u.calls + 1, failures = u.failures + excluded.failures,
    prompt_tokens = u.prompt_tokens + excluded.prompt_tokens,
    completion_tokens = u.completion_tokens + excluded.completion_tokens, updated_at = now()
"""
USAGE_BETWEEN = """
SELECT day, purpose, model, calls, failures, prompt_tokens, completion_tokens FROM cairn.model_usage
WHERE tenant_id = $1 AND day BETWEEN $2 AND $3 ORDER BY day, purpose, model
"""


@dataclass(frozen=True)
class TenantModel:
    """A tenant's override of the deployment's model."""

    base_url: str
    model: str
    api_key: str | None
    updated_at: datetime.datetime


@dataclass(frozen=True)
class UsageRow:
    day: datetime.date
    purpose: str
    model: str
    calls: int
    failures: int
    prompt_tokens: int
    completion_tokens: int


def _override(row: "asyncpg.Record | None") -> TenantModel | None:
    return None if row is None else TenantModel(row["base_url"], row["model"], row["api_key"], row["updated_at"])


class ModelStore:
    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]") -> None:
        self._pool = pool

    async def override(self, tenant: str) -> TenantModel | None:
        async with tenant_transaction(self._pool, tenant) as conn:
            return _override(await conn.fetchrow(GET_OVERRIDE, tenant))

    async def put_override(self, tenant: str, base_url: str, model: str, api_key: str | None) -> TenantModel:
        async with tenant_transaction(self._pool, tenant) as conn:
            stored = _override(await conn.fetchrow(PUT_OVERRIDE, tenant, base_url, model, api_key))
        assert stored is not None
        return stored

    async def delete_override(self, tenant: str) -> bool:
        """False when the tenant had none."""
        async with tenant_transaction(self._pool, tenant) as conn:
            status: str = await conn.execute(DELETE_OVERRIDE, tenant)
        return status != "DELETE 0"

    async def record_usage(
        self, tenant: str, purpose: str, model: str, *, failed: bool, prompt_tokens: int, completion_tokens: int
    ) -> None:
        async with tenant_transaction(self._pool, tenant) as conn:
            await conn.execute(RECORD_USAGE, tenant, purpose, model, int(failed), prompt_tokens, completion_tokens)

    async def usage(self, tenant: str, first: datetime.date, last: datetime.date) -> list[UsageRow]:
        """Rows of the days `first` to `last`, both included."""
        async with tenant_transaction(self._pool, tenant) as conn:
            rows: list[Any] = await conn.fetch(USAGE_BETWEEN, tenant, first, last)
        return [UsageRow(**dict(row)) for row in rows]
