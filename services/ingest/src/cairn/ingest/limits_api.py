"""A tenant's rate limits and quotas, set by the operator (admin API): `PUT|GET
/v1/admin/tenants/{tenant_id}/limits`. Every replica of every service holds the tenant to them within
`CAIRN_LIMITS_LIMITS_CACHE_S` (2 s by default) of a change."""

import uuid
from typing import Any

from fastapi import APIRouter, Depends, Request

from cairn.edge.limit_store import LimitStore
from cairn.edge.problems import Problem
from cairn.edge.rate_limits import Limits
from cairn.edge.tenant_limits import EffectiveLimits, LimitOverride, effective_limits
from cairn.ingest.api import require_admin
from cairn.ingest.store import TenantStore
from cairn.platform.runtime import runtime_of

router = APIRouter(tags=["admin"], dependencies=[Depends(require_admin)])
NO_TENANT: dict[int | str, dict[str, Any]] = {404: {"description": "no such tenant"}}


class TenantLimits(EffectiveLimits):
    tenant_id: str


def _store(request: Request) -> LimitStore:
    limits: Limits = runtime_of(request).extras["limits"]
    return limits.store


async def _existing(request: Request, tenant: uuid.UUID) -> str:
    tenants: TenantStore = runtime_of(request).extras["tenants"]
    if not await tenants.exists(str(tenant)):
        raise Problem(404, f"There is no tenant {tenant}.")
    return str(tenant)


@router.put("/v1/admin/tenants/{tenant_id}/limits", response_model=TenantLimits, responses=NO_TENANT)
async def put_limits(tenant_id: uuid.UUID, body: LimitOverride, request: Request) -> TenantLimits:
    """Set the tenant's own limits (replacing earlier ones); a field left out or null keeps the default.
    Answers the effective limits."""
    tenant = await _existing(request, tenant_id)
    effective = await _store(request).put(tenant, body)
    return TenantLimits(tenant_id=tenant, **effective.model_dump())


@router.get("/v1/admin/tenants/{tenant_id}/limits", response_model=TenantLimits, responses=NO_TENANT)
async def get_limits(tenant_id: uuid.UUID, request: Request) -> TenantLimits:
    """The limits the tenant is held to: its own, merged over the deployment's defaults."""
    tenant = await _existing(request, tenant_id)
    store = _store(request)
    limits: Limits = runtime_of(request).extras["limits"]
    effective = effective_limits(limits.settings, await store.override(tenant))
    return TenantLimits(tenant_id=tenant, **effective.model_dump())
