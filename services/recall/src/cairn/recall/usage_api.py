"""A tenant's own model usage (`GET /v1/usage`): the model calls and tokens its LLM work spent per UTC day,
purpose and model, as the operator sees them at ingest's `GET /v1/admin/tenants/{tenant_id}/usage`."""

import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request

from cairn.edge.auth import Tenant
from cairn.edge.problems import Problem
from cairn.llm import Models, UsageReport, WindowError, usage_report, usage_window
from cairn.platform.runtime import runtime_of

router = APIRouter(tags=["usage"])


@router.get("/v1/usage", response_model=UsageReport, response_model_by_alias=True)
async def get_usage(
    tenant: Tenant,
    request: Request,
    first: Annotated[datetime.date | None, Query(alias="from", description="first UTC day (default: to − 29)")] = None,
    last: Annotated[datetime.date | None, Query(alias="to", description="last UTC day (default: today)")] = None,
) -> UsageReport:
    """Model calls and tokens of the caller's tenant per UTC day, purpose and model."""
    try:
        first, last = usage_window(first, last)
    except WindowError as error:
        raise Problem(
            422, f"The request is invalid: {error.field} {error}.", [{"field": error.field, "message": str(error)}]
        ) from error
    models: Models = runtime_of(request).extras["models"]
    return usage_report(tenant, first, last, await models.store.usage(tenant, first, last))
