"""Tenant API keys: a request's bearer key picks its tenant. Keys are stored only as SHA-256 hashes and
resolved through a SECURITY DEFINER function, the one read that crosses tenants."""

import hashlib
import time
from collections.abc import Mapping
from typing import Annotated

import asyncpg
from fastapi import Depends, Request

from cairn.edge.problems import Problem

AUTHENTICATE = "SELECT ingest.authenticate($1)"


def hash_key(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


class ApiKeys:
    """Resolves keys to tenants, trusting a resolved key for `cache_seconds` to spare the database."""

    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]", cache_seconds: float = 30.0) -> None:
        self._pool = pool
        self._cache: dict[bytes, tuple[str, float]] = {}
        self._cache_seconds = cache_seconds

    async def tenant_for(self, secret: str) -> str | None:
        digest = hash_key(secret)
        cached = self._cache.get(digest)
        if cached and cached[1] > time.monotonic():
            return cached[0]
        async with self._pool.acquire() as conn:
            tenant = await conn.fetchval(AUTHENTICATE, digest)
        if tenant is None:
            return None
        self._cache[digest] = (str(tenant), time.monotonic() + self._cache_seconds)
        return str(tenant)


def bearer_key(headers: Mapping[str, str]) -> str | None:
    """The key of an `Authorization: Bearer <key>` header, or None when there is none."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def bearer_token(request: Request) -> str:
    if (key := bearer_key(request.headers)) is None:
        raise Problem(401, "Send your API key as 'Authorization: Bearer <key>'.")
    return key


async def current_tenant(request: Request) -> str:
    keys: ApiKeys = request.app.state.runtime.extras["api_keys"]
    tenant = await keys.tenant_for(bearer_token(request))
    if tenant is None:
        raise Problem(401, "The API key is not valid (revoked, mistyped or from another deployment).")
    return tenant


Tenant = Annotated[str, Depends(current_tenant)]
