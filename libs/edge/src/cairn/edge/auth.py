"""Tenant API keys: a request's bearer key picks its tenant and says what it may do there (its scopes, and the
agents it is limited to). Keys are stored only as SHA-256 hashes and resolved through SECURITY DEFINER
functions, the one read that crosses tenants.

A process keeps what it resolved: `LISTENING_CACHE_S` while it listens for revocations on Redis
(`cairn.edge.key_revocations`: every revoke and rotate is announced there and forgets the key on every replica
of every service at once), `FALLBACK_CACHE_S` while it does not (Redis away, or not subscribed yet), so that
a revoked key stops working within about a second either way. Whether a key is expired is checked on every
request against the time its grant carries."""

import datetime
import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

import asyncpg
from fastapi import Depends, Request

from cairn.edge.key_use import KeyUse
from cairn.edge.problems import Problem
from cairn.edge.request_agents import requested_agents
from cairn.edge.scopes import ADMIN_TOKEN, PUBLIC, access_of

KEY_GRANT = "SELECT tenant_id, key_id, scopes, agents, expires_at FROM ingest.key_grant($1)"
LISTENING_CACHE_S = 30.0
FALLBACK_CACHE_S = 1.0
CACHE_LIMIT = 100_000  # keys one process remembers; the cache starts over rather than grow without bound


def hash_key(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


@dataclass(frozen=True)
class KeyGrant:
    tenant: str
    key_id: str
    scopes: frozenset[str]
    agents: frozenset[str] | None  # None: every agent of the tenant
    expires_at: datetime.datetime | None

    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= datetime.datetime.now(datetime.UTC)


class ApiKeys:
    """Resolves keys to grants, kept per process as the module docstring says. `forget` (called by the
    revocation listener) drops what was kept; `listening` chooses between the two cache times."""

    def __init__(
        self,
        pool: "asyncpg.Pool[asyncpg.Record]",
        cache_seconds: float = LISTENING_CACHE_S,
        fallback_cache_seconds: float = FALLBACK_CACHE_S,
    ) -> None:
        self._pool = pool
        self._cache: dict[bytes, tuple[KeyGrant, float]] = {}
        self._cache_seconds, self._fallback_cache_seconds = cache_seconds, fallback_cache_seconds
        self.listening = False
        self._forgets = 0  # a read that crossed a `forget` is not kept: it may predate the revocation
        self.use = KeyUse(pool)

    async def tenant_for(self, secret: str) -> str | None:
        grant = await self.key_for(secret)
        return None if grant is None else grant.tenant

    async def key_for(self, secret: str) -> KeyGrant | None:
        digest = hash_key(secret)
        cached = self._cache.get(digest)
        if cached and cached[1] > time.monotonic():
            grant: KeyGrant | None = cached[0]
        else:
            forgets = self._forgets
            grant = await self._read(digest)
            if grant is not None and forgets == self._forgets:
                self._keep(digest, grant)
        if grant is None or grant.expired():
            return None
        await self.use.note(grant.tenant, grant.key_id)
        return grant

    async def _read(self, digest: bytes) -> KeyGrant | None:
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(KEY_GRANT, digest)
        if row is None:
            return None
        agents = row["agents"]
        return KeyGrant(
            tenant=str(row["tenant_id"]),
            key_id=str(row["key_id"]),
            scopes=frozenset(row["scopes"]),
            agents=None if agents is None else frozenset(agents),
            expires_at=row["expires_at"],
        )

    def _keep(self, digest: bytes, grant: KeyGrant) -> None:
        if len(self._cache) >= CACHE_LIMIT:
            self._cache.clear()
        ttl = self._cache_seconds if self.listening else self._fallback_cache_seconds
        self._cache[digest] = (grant, time.monotonic() + ttl)

    def forget(self, key_id: str | None = None) -> None:
        """Drop the kept grant of this key (every kept grant when None): it was revoked or changed."""
        self._forgets += 1
        if key_id is None:
            self._cache.clear()
            return
        for digest in [d for d, (grant, _) in self._cache.items() if grant.key_id == key_id]:
            del self._cache[digest]


def bearer_key(headers: Mapping[str, str]) -> str | None:
    """The key of an `Authorization: Bearer <key>` header, or None when there is none."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def bearer_token(request: Request) -> str:
    if (key := bearer_key(request.headers)) is None:
        raise Problem(401, "Send your API key as 'Authorization: Bearer <key>'.")
    return key


def _needed_scope(request: Request) -> str:
    route = request.scope.get("route")
    access = access_of(request.method, getattr(route, "path", request.url.path))
    if access is None or access in (PUBLIC, ADMIN_TOKEN):
        # a route no key may use: one missing from the table is refused rather than open to every key
        raise Problem(403, f"No API key may use {request.method} {request.url.path}.")
    return access


async def current_key(request: Request) -> KeyGrant:
    """The request's key, checked against the route's scope and, for a key limited to agents, the agents the
    request names; kept on `request.state.key` for handlers that narrow by it."""
    keys: ApiKeys = request.app.state.runtime.extras["api_keys"]
    grant = await keys.key_for(bearer_token(request))
    if grant is None:
        raise Problem(401, "The API key is not valid (revoked, expired, mistyped or from another deployment).")
    scope = _needed_scope(request)
    if scope not in grant.scopes:
        raise Problem(403, f"This API key lacks the '{scope}' scope that {request.method} {request.url.path} needs.")
    if grant.agents is not None:
        outside = sorted(await requested_agents(request) - grant.agents)
        if outside:
            raise Problem(403, f"This API key is limited to agents {sorted(grant.agents)}; not {', '.join(outside)}.")
    request.state.key = grant
    return grant


async def current_tenant(request: Request) -> str:
    return (await current_key(request)).tenant


def key_of(request: Request) -> KeyGrant | None:
    """The key `current_key` admitted for this request (None before, or for the admin token)."""
    grant: KeyGrant | None = getattr(request.state, "key", None)
    return grant


Tenant = Annotated[str, Depends(current_tenant)]
Key = Annotated[KeyGrant, Depends(current_key)]
