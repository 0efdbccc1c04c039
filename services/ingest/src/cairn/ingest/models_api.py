"""Each tenant's model, set by the operator only (admin API): `PUT|GET|DELETE /v1/admin/tenants/{tenant_id}/llm`,
and what the tenant's LLM work spent, `GET /v1/admin/tenants/{tenant_id}/usage`.

An override points the tenant's LLM work (recall's memory sub-agent, the memory writer) at another
OpenAI-compatible server. The services call it from inside the deployment, so its host must be one the operator
listed in `CAIRN_LLM_ALLOWED_HOSTS` (`cairn.llm.hosts`); the key is stored for the calls and never answered.
Services read the override within `cairn.llm.TENANT_CACHE_S` of a change.
"""

import datetime
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel, Field

from cairn.edge.problems import Problem
from cairn.events.fields import Name
from cairn.ingest.api import ingest_settings, require_admin
from cairn.ingest.audit import Actor, AuditLog
from cairn.ingest.store import TenantStore
from cairn.llm import ModelStore, TenantModel, UsageReport, WindowError, override_refusal, usage_report, usage_window
from cairn.platform.runtime import runtime_of

router = APIRouter(tags=["admin"], dependencies=[Depends(require_admin)])
NO_TENANT: dict[int | str, dict[str, Any]] = {
    404: {"description": "no such tenant, or (GET, DELETE) it has no model override"}
}


class ModelOverride(BaseModel):
    base_url: Name = Field(
        min_length=1,
        max_length=2000,
        description="the OpenAI-compatible API's base URL (…/chat/completions is appended); its host must be on "
        "CAIRN_LLM_ALLOWED_HOSTS",
    )
    model: Name = Field(min_length=1, max_length=200)
    api_key: Name | None = Field(default=None, min_length=1, max_length=4000, description="stored, never answered")


class StoredOverride(BaseModel):
    tenant_id: str
    base_url: str
    model: str
    api_key_set: bool
    updated_at: datetime.datetime


def _view(tenant: uuid.UUID, stored: TenantModel) -> StoredOverride:
    return StoredOverride(
        tenant_id=str(tenant),
        base_url=stored.base_url,
        model=stored.model,
        api_key_set=stored.api_key is not None,
        updated_at=stored.updated_at,
    )


def _models(request: Request) -> ModelStore:
    store: ModelStore = runtime_of(request).extras["model_store"]
    return store


async def _audit(request: Request, tenant: str, action: str, target: str | None) -> None:
    log: AuditLog = runtime_of(request).extras["audit"]
    await log.append(Actor.admin(request.client.host if request.client else None), tenant, action, target)


async def _existing(request: Request, tenant: uuid.UUID) -> str:
    tenants: TenantStore = runtime_of(request).extras["tenants"]
    if not await tenants.exists(str(tenant)):
        raise Problem(404, f"There is no tenant {tenant}.")
    return str(tenant)


@router.put("/v1/admin/tenants/{tenant_id}/llm", response_model=StoredOverride, responses=NO_TENANT)
async def put_model(tenant_id: uuid.UUID, body: ModelOverride, request: Request) -> StoredOverride:
    """Point the tenant's LLM work at this model instead of the deployment's (replaces an earlier override)."""
    refusal = override_refusal(body.base_url, ingest_settings(request).llm.allowed_hosts)
    if refusal is not None:
        raise Problem(422, f"The request is invalid: base_url {refusal}.", [{"field": "base_url", "message": refusal}])
    tenant = await _existing(request, tenant_id)
    stored = await _models(request).put_override(tenant, body.base_url, body.model, body.api_key)
    await _audit(request, tenant, "model.set", f"model:{body.model}@{body.base_url}")
    return _view(tenant_id, stored)


@router.get("/v1/admin/tenants/{tenant_id}/llm", response_model=StoredOverride, responses=NO_TENANT)
async def get_model(tenant_id: uuid.UUID, request: Request) -> StoredOverride:
    """The tenant's override (`api_key_set` says whether a key is stored; the key itself is never answered)."""
    stored = await _models(request).override(await _existing(request, tenant_id))
    if stored is None:
        raise Problem(404, f"Tenant {tenant_id} has no model override: the deployment's model (CAIRN_LLM_*) applies.")
    return _view(tenant_id, stored)


@router.delete("/v1/admin/tenants/{tenant_id}/llm", status_code=204, responses=NO_TENANT)
async def delete_model(tenant_id: uuid.UUID, request: Request) -> Response:
    """Back to the deployment's model."""
    tenant = await _existing(request, tenant_id)
    if not await _models(request).delete_override(tenant):
        raise Problem(404, f"Tenant {tenant_id} has no model override.")
    await _audit(request, tenant, "model.delete", None)
    return Response(status_code=204)


@router.get(
    "/v1/admin/tenants/{tenant_id}/usage",
    response_model=UsageReport,
    response_model_by_alias=True,
    responses={404: {"description": "no such tenant"}},
)
async def get_usage(
    tenant_id: uuid.UUID,
    request: Request,
    first: Annotated[datetime.date | None, Query(alias="from", description="first UTC day (default: to − 29)")] = None,
    last: Annotated[datetime.date | None, Query(alias="to", description="last UTC day (default: today)")] = None,
) -> UsageReport:
    """Model calls and tokens of the tenant per UTC day, purpose and model."""
    try:
        first, last = usage_window(first, last)
    except WindowError as error:
        raise Problem(
            422, f"The request is invalid: {error.field} {error}.", [{"field": error.field, "message": str(error)}]
        ) from error
    tenant = await _existing(request, tenant_id)
    return usage_report(tenant, first, last, await _models(request).usage(tenant, first, last))
