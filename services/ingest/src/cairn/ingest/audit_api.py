"""The audit log for the operator (`GET /v1/admin/audit`, admin token only: a tenant's key gets 403)."""

import datetime
import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field

from cairn.ingest.api import require_admin
from cairn.ingest.audit import AuditLog
from cairn.platform.runtime import runtime_of

router = APIRouter(tags=["admin"], dependencies=[Depends(require_admin)])
MAX_ENTRIES = 1000


class AuditEntryView(BaseModel):
    at: datetime.datetime
    actor: str = Field(description="`admin` (the admin token) or `key:<key_id>`")
    tenant_id: str
    action: str = Field(description="e.g. tenant.create, key.create, key.revoke, key.rotate, model.set, model.delete")
    target: str | None
    from_: str | None = Field(alias="from", description="the client address the request came from")


class AuditEntries(BaseModel):
    entries: list[AuditEntryView]


@router.get("/v1/admin/audit", response_model=AuditEntries, response_model_by_alias=True)
async def read_audit(
    request: Request,
    tenant_id: uuid.UUID | None = None,
    since: Annotated[datetime.datetime | None, Query(description="entries at or after this time")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_ENTRIES)] = 100,
) -> AuditEntries:
    """Admin and key actions, oldest first from `since` (page on with the last entry's `at`)."""
    log: AuditLog = runtime_of(request).extras["audit"]
    found = await log.entries(None if tenant_id is None else str(tenant_id), since, limit)
    entries = [AuditEntryView.model_validate({**e.__dict__, "from": e.client}) for e in found]
    return AuditEntries(entries=entries)
