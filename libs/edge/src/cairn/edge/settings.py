"""How a service listens for HTTP (env prefix `CAIRN_HTTP_`)."""

from collections.abc import Callable
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class HttpSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_HTTP_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    keep_alive_s: int = Field(
        default=75,
        ge=1,
        description="how long an idle keep-alive connection is kept open: longer than clients' and gateways' own "
        "idle timeouts (httpx 5 s, nginx 60 s), so that they close it first; a server closing a connection "
        "just as a client reuses it fails that request",
    )
    loop: Literal["uvloop", "asyncio"] = Field(
        default="uvloop",
        description="the event loop every task of the service runs on (consumers, pools, HTTP): uvloop spends "
        "less CPU per message than asyncio's own on the loop, its transports and the socket writes",
    )
    parser: Literal["httptools", "h11"] = Field(
        default="httptools", description="the HTTP/1.1 parser: httptools (C, llhttp) or h11 (pure Python)"
    )
    max_body_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1024,
        description="the largest request body: a larger Content-Length is refused with 413 before any of it is "
        "read, and a chunked body is cut off with 413 once it grows past it. 16 MiB holds a 1000-message batch of "
        "15 KiB texts; `cairn import` splits its batches to stay under it",
    )
    header_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="how long a client may take to send a request's headers (and a new connection its first "
        "byte) before the connection is closed: a half-sent request must not hold a connection for ever",
    )
    body_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="how long a request's body may take to arrive whole once the service reads it; a slower one "
        "is answered 408 problem+json and the connection closed (the header-read timeout ends with the headers)",
    )
    max_concurrency: int = Field(
        default=512,
        ge=1,
        description="requests a process works on at once; beyond it a request is answered 503 problem+json with "
        "Retry-After at once (health checks are never refused)",
    )
    dependency_timeout_s: float = Field(
        default=2.0,
        gt=0,
        description="how long a request waits for a dependency that is down (a Postgres connection, JetStream's "
        "ack of a publish) before it is answered 503 problem+json with Retry-After",
    )


def http_defaults(port: int) -> Callable[[], HttpSettings]:
    """A default factory giving a service its own default port unless CAIRN_HTTP_PORT says otherwise."""

    def build() -> HttpSettings:
        settings = HttpSettings()
        return settings if "port" in settings.model_fields_set else settings.model_copy(update={"port": port})

    return build


class LimitSettings(BaseSettings):
    """Every tenant's rate limits and quotas unless the operator set its own (`PUT
    /v1/admin/tenants/{tenant_id}/limits`). The defaults are far above what one tenant of the benches sends (on a
    2-core machine one ingest process answers some hundreds of requests/s in all, and a tenant posting 100-message
    batches at full speed is accepted ~30 requests/s), so only an override or a much larger deployment meets them."""

    model_config = SettingsConfigDict(env_prefix="CAIRN_LIMITS_", extra="ignore")

    enabled: bool = Field(default=True, description="off: no request is counted or refused, no headers are sent")
    write_per_s: float = Field(default=5000.0, gt=0, description="messages, batches, session commands, memory writes")
    search_per_s: float = Field(default=5000.0, gt=0, description="searches, history and every other read")
    recall_per_s: float = Field(default=2000.0, gt=0, description="`POST /v1/recall`")
    admin_per_s: float = Field(default=100.0, gt=0, description="keys, limits and usage under a tenant's key")
    key_share: float = Field(
        default=1.0, gt=0, le=1, description="each key's own rate, as a share of its tenant's (per class)"
    )
    burst_s: float = Field(
        default=1.0, gt=0, description="how many seconds of a rate a client may send at once after a quiet spell"
    )
    messages_per_day: int = Field(default=50_000_000, ge=1, description="messages accepted per tenant per UTC day")
    stored_bytes: int = Field(default=100 * 1024**3, ge=1, description="transcript and memory text stored")
    memory_documents: int = Field(default=100_000, ge=1, description="live memory documents per tenant")
    limits_cache_s: float = Field(
        default=2.0, ge=0, description="how long a tenant's limits are reused before Postgres is read again"
    )
    usage_cache_s: float = Field(
        default=30.0, ge=0, description="how long a tenant's stored bytes and documents are reused (read anew behind)"
    )
    auth_failures: int = Field(
        default=50, ge=1, description="invalid keys one client address may send per window before it is answered 429"
    )
    auth_window_s: float = Field(default=10.0, gt=0, description="the window of `auth_failures`")
    invalid_key_cache_s: float = Field(
        default=5.0, ge=0, description="how long an invalid key is answered 401 without a database lookup"
    )
    redis_timeout_s: float = Field(
        default=0.25, gt=0, description="how long a count may wait for Redis before the request is let through"
    )
    redis_retry_s: float = Field(
        default=2.0, ge=0, description="after Redis failed, how long requests go uncounted before it is tried again"
    )
