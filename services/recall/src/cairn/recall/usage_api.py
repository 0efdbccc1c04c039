"""A tenant's own usage (`GET /v1/usage`): the model calls and tokens its LLM work spent per UTC day, purpose and
model, as the operator sees them at ingest's `GET /v1/admin/tenants/{tenant_id}/usage`, and what it uses of each
of its limits now (`limits`)."""

import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from cairn.edge.auth import Tenant
from cairn.edge.problems import Problem
from cairn.edge.rate_limits import Limits
from cairn.edge.tenant_limits import Rates
from cairn.llm import Models, UsageReport, WindowError, usage_report, usage_window
from cairn.platform.runtime import runtime_of

router = APIRouter(tags=["usage"])


class Used(BaseModel):
    limit: int
    used: int | None = Field(description="null while it cannot be counted (its store does not answer)")


class LimitUsage(BaseModel):
    requests_per_s: Rates = Field(description="the tenant's rates by class (each answer's RateLimit-* headers say "
                                  "what is left of the one it was counted in)")  # fmt: skip
    key_requests_per_s: Rates
    messages_per_day: Used = Field(description="messages accepted this UTC day")
    stored_bytes: Used = Field(description="transcript and memory text stored")
    memory_documents: Used = Field(description="live memory documents")


class TenantUsage(UsageReport):
    limits: LimitUsage


async def limit_usage(limits: Limits, tenant: str) -> LimitUsage:
    effective = await limits.store.limits(tenant)
    today = await limits.limiter.messages_today(tenant, datetime.datetime.now(datetime.UTC))
    stored = await limits.store.stored(tenant)
    return LimitUsage(
        requests_per_s=effective.requests_per_s,
        key_requests_per_s=effective.key_requests_per_s,
        messages_per_day=Used(limit=effective.messages_per_day, used=today),
        stored_bytes=Used(limit=effective.stored_bytes, used=stored and stored.stored_bytes),
        memory_documents=Used(limit=effective.memory_documents, used=stored and stored.memory_documents),
    )


@router.get("/v1/usage", response_model=TenantUsage, response_model_by_alias=True)
async def get_usage(
    tenant: Tenant,
    request: Request,
    first: Annotated[datetime.date | None, Query(alias="from", description="first UTC day (default: to − 29)")] = None,
    last: Annotated[datetime.date | None, Query(alias="to", description="last UTC day (default: today)")] = None,
) -> TenantUsage:
    """Model calls and tokens of the caller's tenant per UTC day, purpose and model, and its use of its limits."""
    try:
        first, last = usage_window(first, last)
    except WindowError as error:
        raise Problem(
            422, f"The request is invalid: {error.field} {error}.", [{"field": error.field, "message": str(error)}]
        ) from error
    runtime = runtime_of(request)
    models: Models = runtime.extras["models"]
    report = usage_report(tenant, first, last, await models.store.usage(tenant, first, last))
    return TenantUsage(**report.model_dump(by_alias=True), limits=await limit_usage(runtime.extras["limits"], tenant))
