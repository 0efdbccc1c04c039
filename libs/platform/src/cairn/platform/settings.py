"""The settings every service composes into its own class (env prefix `CAIRN_`): the connections of the
storage, delivery and HTTP libraries, plus Redis and logging."""

from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from cairn.delivery.settings import NatsSettings, ProcessedSettings, SupervisionSettings
from cairn.edge.settings import HttpSettings, LimitSettings
from cairn.storage.settings import PostgresSettings


class RedisSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_REDIS_", extra="ignore")

    url: str = "redis://127.0.0.1:6379/0"


class TelemetrySettings(BaseSettings):
    """Only the switch for JSON logs; the exporter is chosen by the standard OTEL_* variables."""

    model_config = SettingsConfigDict(env_prefix="CAIRN_LOG_", extra="ignore")

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    json_format: bool = Field(default=True, alias="CAIRN_LOG_JSON")


class MetricsSettings(BaseSettings):
    """`GET /metrics`, for operators: open unless a token is set (inside a cluster Prometheus scrapes pods directly,
    and the network policy decides who may)."""

    model_config = SettingsConfigDict(env_prefix="CAIRN_METRICS_", extra="ignore")

    token: SecretStr | None = Field(
        default=None, description="when set, a scrape must send `Authorization: Bearer <token>` (else 401)"
    )
    nats_wait_s: float = Field(
        default=1.0,
        gt=0,
        description="how long a scrape waits for JetStream's figures (pending messages, dead letters held) before "
        "it answers without them",
    )
    cache_s: float = Field(
        default=5.0,
        ge=0,
        description="how long JetStream's figures, or the failure to read them, are reused by the next scrapes",
    )


class ServiceSettings(BaseSettings):
    """The connections every service has; a service subclasses this and adds its own fields."""

    model_config = SettingsConfigDict(env_prefix="CAIRN_", extra="ignore")

    postgres: PostgresSettings = Field(default_factory=PostgresSettings)
    nats: NatsSettings = Field(default_factory=NatsSettings)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    processed: ProcessedSettings = Field(default_factory=ProcessedSettings)
    supervision: SupervisionSettings = Field(default_factory=SupervisionSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
