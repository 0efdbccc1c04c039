"""The settings every service composes into its own class (env prefix `CAIRN_`): the connections of the
storage, delivery and HTTP libraries, plus Redis and logging."""

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from cairn.delivery.settings import NatsSettings, ProcessedSettings, SupervisionSettings
from cairn.edge.settings import HttpSettings
from cairn.storage.settings import PostgresSettings


class RedisSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_REDIS_", extra="ignore")

    url: str = "redis://127.0.0.1:6379/0"


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
    supervision: SupervisionSettings = Field(default_factory=SupervisionSettings)
