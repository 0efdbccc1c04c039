"""Settings pieces every service composes into its own settings class (env prefix `CAIRN_`)."""

from collections.abc import Callable
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class PostgresSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_POSTGRES_", extra="ignore")

    url: SecretStr = SecretStr("postgresql://cairn_app@127.0.0.1:5432/cairn")
    admin_url: SecretStr | None = None  # owner/superuser: migrations only, never a service
    app_password: SecretStr | None = None  # set on the cairn_app and cairn_projector roles by `cairn migrate`
    # Projections log in as cairn_projector (see migration 0025); by default `url` with that user instead.
    projector_url: SecretStr | None = None
    pool_min: int = Field(default=1, ge=0)
    pool_max: int = Field(default=10, ge=1)

    def projector(self) -> "PostgresSettings":
        """These settings for a projection service's pool: logged in as cairn_projector."""
        url = self.projector_url or SecretStr(_with_user(self.url.get_secret_value(), "cairn_projector"))
        return self.model_copy(update={"url": url})


def _with_user(url: str, user: str) -> str:
    parts = urlsplit(url)
    credentials = f"{user}:{parts.password}" if parts.password is not None else user
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{credentials}@{host}"))


class NatsSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_NATS_", extra="ignore")

    url: str = "nats://127.0.0.1:4222"
    max_deliver: int = Field(default=5, ge=1, description="deliveries before a message is dead-lettered")
    fetch_batch: int = Field(default=64, ge=1)
    # Projections that apply a fetched batch in one transaction (whatever its tenants) take more at a time
    # when there is a backlog: the round trips are per batch. Without a backlog a fetch returns what is there.
    bulk_fetch_batch: int = Field(default=256, ge=1)
    ack_wait_s: float = Field(default=30.0, gt=0)
    # How many NATS servers keep each stream (`cairn migrate` declares it, and raises it on existing streams): one
    # server's loss loses a stream of one replica. JetStream refuses more than one on a server that is not clustered.
    stream_replicas: int = Field(default=1, ge=1, le=5, description="servers that keep a copy of each stream")


class ProcessedSettings(BaseSettings):
    """How long the records that make projections exactly-once are kept (migration 0051)."""

    model_config = SettingsConfigDict(env_prefix="CAIRN_PROCESSED_", extra="ignore")

    keep_h: float = Field(
        default=168.0,
        ge=1.0,
        description="hours a processed event's record and outbox are kept, for redeliveries and late duplicates",
    )
    sweep_s: float = Field(default=3600.0, gt=0, description="seconds between sweeps of older records")


class RedisSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_REDIS_", extra="ignore")

    url: str = "redis://127.0.0.1:6379/0"


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


class TelemetrySettings(BaseSettings):
    """Only the switch for JSON logs; the exporter is chosen by the standard OTEL_* variables."""

    model_config = SettingsConfigDict(env_prefix="CAIRN_LOG_", extra="ignore")

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    json_format: bool = Field(default=True, alias="CAIRN_LOG_JSON")


class ServiceSettings(BaseSettings):
    """The connections every service has; a service subclasses this and adds its own fields."""

    model_config = SettingsConfigDict(env_prefix="CAIRN_", extra="ignore")

    postgres: PostgresSettings = Field(default_factory=PostgresSettings)
    nats: NatsSettings = Field(default_factory=NatsSettings)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    processed: ProcessedSettings = Field(default_factory=ProcessedSettings)
