"""API keys (API.md "Keys, limits, audit"): the operator over any tenant's keys
(`/v1/admin/tenants/{tenant_id}/keys`, admin token) and a tenant over its own (`/v1/keys`, a key with the
`admin` scope). A revocation or rotation is announced to every replica once it commits (`key_revocations`).

A tenant's key cannot hand out more than it holds: the keys it creates or rotates have no scope and no agent
beyond its own (the operator's token has no such bound)."""

import datetime
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request, Response
from pydantic import AwareDatetime, BaseModel, Field

from cairn.edge.auth import Key, KeyGrant
from cairn.edge.key_revocations import announce
from cairn.edge.problems import Problem
from cairn.edge.scopes import Scope
from cairn.events.envelope import Token
from cairn.events.fields import Name
from cairn.ingest.api import require_admin
from cairn.ingest.audit import Actor
from cairn.ingest.domain import new_api_key
from cairn.ingest.keys import KeySpec, KeyStore, StoredKey, UnknownKey
from cairn.ingest.store import TenantStore
from cairn.platform.runtime import runtime_of

router = APIRouter(tags=["keys"])
DEFAULT_GRACE_S = 3600  # a rotated key keeps working an hour: time to roll the new one out to every adapter
MAX_GRACE_S = 7 * 24 * 3600
DEFAULT_SCOPES: list[Scope] = ["write", "read", "memory:write"]
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"description": "no such tenant or key (for rotate: none that still works)"}
}
TENANT_KEY: dict[int | str, dict[str, Any]] = {
    403: {"description": "the key lacks the `admin` scope, or asks for more than it holds"}
}


class NewKeyRequest(BaseModel):
    name: Name = Field(min_length=1, max_length=200)
    scopes: list[Scope] = Field(
        default_factory=lambda: list(DEFAULT_SCOPES), min_length=1, max_length=4, description="default: all but admin"
    )
    agents: list[Token] | None = Field(
        default=None, min_length=1, max_length=100, description="the only agents the key may name; null: every agent"
    )
    expires_at: AwareDatetime | None = Field(default=None, description="when the key stops working; null: never")


class Rotation(BaseModel):
    grace_s: int = Field(
        default=DEFAULT_GRACE_S, ge=0, le=MAX_GRACE_S, description="how long the old key keeps working (0: not at all)"
    )


class CreatedKey(BaseModel):
    key_id: str
    api_key: str = Field(description="shown once; only its hash is stored")
    prefix: str = Field(description="the key's first characters, as lists show it")
    name: str
    scopes: list[str]
    agents: list[str] | None
    expires_at: datetime.datetime | None
    created_at: datetime.datetime


class KeyView(BaseModel):
    key_id: str
    name: str
    prefix: str
    scopes: list[str]
    agents: list[str] | None
    created_at: datetime.datetime
    last_used_at: datetime.datetime | None = Field(description="updated at most once a minute")
    expires_at: datetime.datetime | None
    revoked_at: datetime.datetime | None


class KeyList(BaseModel):
    keys: list[KeyView]


def _store(request: Request) -> KeyStore:
    store: KeyStore = runtime_of(request).extras["keys"]
    return store


def _client(request: Request) -> str | None:
    return request.client.host if request.client else None


async def _tenant(request: Request, tenant_id: uuid.UUID) -> str:
    tenants: TenantStore = runtime_of(request).extras["tenants"]
    if not await tenants.exists(str(tenant_id)):
        raise Problem(404, f"There is no tenant {tenant_id}.")
    return str(tenant_id)


def _created(key: StoredKey, secret: str) -> CreatedKey:
    return CreatedKey(api_key=secret, **{f: getattr(key, f) for f in CreatedKey.model_fields if f != "api_key"})


def _spec(body: NewKeyRequest) -> KeySpec:
    if body.expires_at is not None and body.expires_at <= datetime.datetime.now(datetime.UTC):
        message = "must be in the future"
        raise Problem(
            422, f"The request is invalid: expires_at {message}.", [{"field": "expires_at", "message": message}]
        )
    agents = None if body.agents is None else sorted(set(body.agents))
    return KeySpec(body.name, sorted(set(body.scopes)), agents, body.expires_at)


def _within(holder: KeyGrant, scopes: list[str], agents: list[str] | None) -> None:
    """403 unless a key with these scopes and agents gives nothing the holder does not have."""
    if beyond := sorted(set(scopes) - holder.scopes):
        raise Problem(403, f"A key cannot hand out scopes it does not hold: {', '.join(beyond)}.")
    if holder.agents is not None and (agents is None or not set(agents) <= holder.agents):
        raise Problem(403, f"A key limited to agents {sorted(holder.agents)} cannot hand out other agents.")


async def _create(request: Request, tenant: str, spec: KeySpec, actor: Actor) -> CreatedKey:
    secret = new_api_key()
    return _created(await _store(request).create(tenant, spec, secret, actor), secret.secret)


async def _revoke(request: Request, tenant: str, key_id: uuid.UUID, actor: Actor) -> Response:
    try:
        await _store(request).revoke(tenant, key_id, actor)
    except UnknownKey as error:
        raise Problem(404, f"There is no key {key_id}.") from error
    await announce(runtime_of(request).redis, str(key_id))
    return Response(status_code=204)


async def _rotate(request: Request, tenant: str, key_id: uuid.UUID, grace_s: int, actor: Actor) -> CreatedKey:
    secret = new_api_key()
    try:
        _, new = await _store(request).rotate(tenant, key_id, grace_s, secret, actor)
    except UnknownKey as error:
        raise Problem(404, f"There is no working key {key_id} to rotate.") from error
    await announce(runtime_of(request).redis, str(key_id))  # its end moved: replicas read it again
    return _created(new, secret.secret)


# The operator, over any tenant's keys.
admin = APIRouter(tags=["admin"], dependencies=[Depends(require_admin)], responses=NOT_FOUND)
TenantId = Annotated[uuid.UUID, Path()]


@admin.post("/v1/admin/tenants/{tenant_id}/keys", status_code=201, response_model=CreatedKey)
async def admin_create_key(tenant_id: TenantId, body: NewKeyRequest, request: Request) -> CreatedKey:
    """A new key for the tenant; the key is shown only in this answer."""
    return await _create(request, await _tenant(request, tenant_id), _spec(body), Actor.admin(_client(request)))


@admin.get("/v1/admin/tenants/{tenant_id}/keys", response_model=KeyList)
async def admin_list_keys(tenant_id: TenantId, request: Request) -> KeyList:
    """The tenant's keys, revoked and expired ones included, by prefix (never the key)."""
    keys = await _store(request).list(await _tenant(request, tenant_id))
    return KeyList(keys=[KeyView(**k.__dict__) for k in keys])


@admin.delete("/v1/admin/tenants/{tenant_id}/keys/{key_id}", status_code=204)
async def admin_revoke_key(tenant_id: TenantId, key_id: uuid.UUID, request: Request) -> Response:
    """Revoke the key: it stops working on every replica of every service within a second."""
    return await _revoke(request, await _tenant(request, tenant_id), key_id, Actor.admin(_client(request)))


@admin.post("/v1/admin/tenants/{tenant_id}/keys/{key_id}/rotate", status_code=201, response_model=CreatedKey)
async def admin_rotate_key(
    tenant_id: TenantId, key_id: uuid.UUID, request: Request, body: Rotation | None = None
) -> CreatedKey:
    """A new key like this one (name, scopes, agents, expiry); this one keeps working `grace_s` more seconds."""
    grace_s = (body or Rotation()).grace_s
    return await _rotate(request, await _tenant(request, tenant_id), key_id, grace_s, Actor.admin(_client(request)))


# A tenant, over its own keys, with a key that has the `admin` scope (checked by `Key`, see cairn.edge.scopes).
own = APIRouter(tags=["keys"], responses={**NOT_FOUND, **TENANT_KEY})


@own.post("/v1/keys", status_code=201, response_model=CreatedKey)
async def create_key(body: NewKeyRequest, key: Key, request: Request) -> CreatedKey:
    """A new key of the caller's tenant, with no scope or agent beyond the caller's own."""
    spec = _spec(body)
    _within(key, spec.scopes, spec.agents)
    return await _create(request, key.tenant, spec, Actor.key(key.key_id, _client(request)))


@own.get("/v1/keys", response_model=KeyList)
async def list_keys(key: Key, request: Request) -> KeyList:
    """The tenant's keys, revoked and expired ones included, by prefix (never the key)."""
    return KeyList(keys=[KeyView(**k.__dict__) for k in await _store(request).list(key.tenant)])


@own.delete("/v1/keys/{key_id}", status_code=204)
async def revoke_key(key_id: uuid.UUID, key: Key, request: Request) -> Response:
    """Revoke one of the tenant's keys (the caller's own too): it stops working everywhere within a second."""
    return await _revoke(request, key.tenant, key_id, Actor.key(key.key_id, _client(request)))


@own.post("/v1/keys/{key_id}/rotate", status_code=201, response_model=CreatedKey)
async def rotate_key(key_id: uuid.UUID, key: Key, request: Request, body: Rotation | None = None) -> CreatedKey:
    """A new key like this one; this one keeps working `grace_s` more seconds. Only a key the caller could
    create itself (no scope or agent beyond its own)."""
    try:
        target = await _store(request).get(key.tenant, key_id)
    except UnknownKey as error:
        raise Problem(404, f"There is no key {key_id}.") from error
    _within(key, target.scopes, target.agents)
    grace_s = (body or Rotation()).grace_s
    return await _rotate(request, key.tenant, key_id, grace_s, Actor.key(key.key_id, _client(request)))
