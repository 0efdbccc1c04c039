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


def http_defaults(port: int) -> Callable[[], HttpSettings]:
    """A default factory giving a service its own default port unless CAIRN_HTTP_PORT says otherwise."""

    def build() -> HttpSettings:
        settings = HttpSettings()
        return settings if "port" in settings.model_fields_set else settings.model_copy(update={"port": port})

    return build
