"""Settings of the ingest service (env prefix CAIRN_)."""

from pydantic import Field, SecretStr

from cairn.platform.settings import HttpSettings, ServiceSettings, http_defaults


class IngestSettings(ServiceSettings):
    http: HttpSettings = Field(default_factory=http_defaults(8081))
    admin_token: SecretStr | None = Field(default=None, description="bearer token of the admin API")
