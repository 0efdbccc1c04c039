"""The usage report both doors answer: the operator's `GET /v1/admin/tenants/{tenant_id}/usage` (ingest) and a
tenant's own `GET /v1/usage` (recall), for the UTC days `from` to `to`, both included."""

import datetime

from pydantic import BaseModel, Field

from cairn.llm.store import UsageRow

DEFAULT_DAYS = 30  # without `from`: the 30 days up to `to`
MAX_DAYS = 366
# The years every time of cairn's API lies in (cairn.events.fields), so a window's arithmetic never leaves the
# calendar.
EARLIEST, LATEST = datetime.date(1900, 1, 1), datetime.date(9999, 12, 31)


class UsageLine(BaseModel):
    day: datetime.date
    purpose: str = Field(description='what the calls were for, e.g. "recall"')
    model: str
    calls: int
    failures: int = Field(description="calls that got no usable answer (counted in calls too)")
    prompt_tokens: int
    completion_tokens: int


class UsageTotal(BaseModel):
    calls: int
    failures: int
    prompt_tokens: int
    completion_tokens: int


class UsageReport(BaseModel):
    tenant_id: str
    from_: datetime.date = Field(alias="from", serialization_alias="from")
    to: datetime.date
    days: list[UsageLine] = Field(description="one line per UTC day, purpose and model that had calls")
    total: UsageTotal


class WindowError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def usage_window(first: datetime.date | None, last: datetime.date | None) -> tuple[datetime.date, datetime.date]:
    """The days asked for: `to` defaults to today (UTC), `from` to 30 days up to `to`; at most 366 days."""
    for field, day in (("from", first), ("to", last)):
        if day is not None and not EARLIEST <= day <= LATEST:
            raise WindowError(field, f"must be a day of the years {EARLIEST.year}–{LATEST.year}")
    last = last or datetime.datetime.now(datetime.UTC).date()
    first = first or max(EARLIEST, last - datetime.timedelta(days=DEFAULT_DAYS - 1))
    if first > last:
        raise WindowError("from", "must not be after to")
    if (last - first).days + 1 > MAX_DAYS:
        raise WindowError("from", f"must be at most {MAX_DAYS} days before to")
    return first, last


def usage_report(tenant: str, first: datetime.date, last: datetime.date, rows: list[UsageRow]) -> UsageReport:
    lines = [UsageLine(**row.__dict__) for row in rows]
    total = UsageTotal(
        calls=sum(line.calls for line in lines),
        failures=sum(line.failures for line in lines),
        prompt_tokens=sum(line.prompt_tokens for line in lines),
        completion_tokens=sum(line.completion_tokens for line in lines),
    )
    return UsageReport.model_validate({"tenant_id": tenant, "from": first, "to": last, "days": lines, "total": total})
