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
