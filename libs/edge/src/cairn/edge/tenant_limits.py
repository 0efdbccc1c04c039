"""A tenant's limits: what the operator set for it (`PUT /v1/admin/tenants/{tenant_id}/limits`, any field left
out or null keeps the deployment's default) merged over the defaults of `LimitSettings`. Pure: no I/O."""

from typing import Literal

from pydantic import BaseModel, Field

from cairn.edge.settings import LimitSettings

RequestClass = Literal["write", "search", "recall", "admin"]
REQUEST_CLASSES: tuple[RequestClass, ...] = ("write", "search", "recall", "admin")
SEARCH_PATHS = frozenset({"/v1/sessions/search", "/v1/memory/search"})
ADMIN_PREFIXES = ("/v1/keys", "/v1/usage", "/v1/admin/")


class RequestRates(BaseModel):
    write: float | None = Field(default=None, gt=0, description="messages, batches, session commands, memory writes")
    search: float | None = Field(default=None, gt=0, description="searches, history and every other read")
    recall: float | None = Field(default=None, gt=0, description="`POST /v1/recall`")
    admin: float | None = Field(default=None, gt=0, description="keys, limits and usage under a tenant's key")


class LimitOverride(BaseModel):
    """The body of `PUT …/limits`: the tenant's own limits; null or absent = the deployment's default."""

    requests_per_s: RequestRates | None = Field(default=None, description="requests per second per tenant, by class")
    key_requests_per_s: RequestRates | None = Field(
        default=None, description="requests per second per API key, by class (default: the tenant's × key share)"
    )
    burst_s: float | None = Field(
        default=None, gt=0, le=3600, description="seconds of a rate a client may send at once after a quiet spell"
    )
    messages_per_day: int | None = Field(default=None, ge=1, description="messages accepted per UTC day")
    stored_bytes: int | None = Field(default=None, ge=1, description="transcript and memory text stored")
    memory_documents: int | None = Field(default=None, ge=1, description="live memory documents")


class Rates(BaseModel):
    write: float
    search: float
    recall: float
    admin: float

    def of(self, kind: RequestClass) -> float:
        rate: float = getattr(self, kind)
        return rate


class EffectiveLimits(BaseModel):
    """The limits a tenant's requests are held to now."""

    requests_per_s: Rates
    key_requests_per_s: Rates
    burst_s: float
    messages_per_day: int
    stored_bytes: int
    memory_documents: int


def effective_limits(defaults: LimitSettings, override: LimitOverride | None) -> EffectiveLimits:
    own = override or LimitOverride()
    tenant_rates = own.requests_per_s or RequestRates()
    base = {"write": defaults.write_per_s, "search": defaults.search_per_s,
            "recall": defaults.recall_per_s, "admin": defaults.admin_per_s}  # fmt: skip
    rates = Rates(**{kind: getattr(tenant_rates, kind) or base[kind] for kind in REQUEST_CLASSES})
    key_rates = own.key_requests_per_s or RequestRates()
    per_key = Rates(
        **{kind: getattr(key_rates, kind) or rates.of(kind) * defaults.key_share for kind in REQUEST_CLASSES}
    )
    return EffectiveLimits(
        requests_per_s=rates,
        key_requests_per_s=per_key,
        burst_s=own.burst_s or defaults.burst_s,
        messages_per_day=own.messages_per_day or defaults.messages_per_day,
        stored_bytes=own.stored_bytes or defaults.stored_bytes,
        memory_documents=own.memory_documents or defaults.memory_documents,
    )


def request_class(method: str, path: str) -> RequestClass:
    """Which of a tenant's rates a request counts against."""
    if path == "/v1/recall" and method == "POST":
        return "recall"
    if path.startswith(ADMIN_PREFIXES):
        return "admin"
    if method in ("GET", "HEAD", "OPTIONS") or path in SEARCH_PATHS:
        return "search"
    return "write"


def adds_document(method: str, path: str) -> bool:
    """A write that may create a memory document (held to `memory_documents`)."""
    return (method == "PUT" and path.startswith("/v1/memory/files/")) or (
        method == "POST" and path == "/v1/memory/daily"
    )
