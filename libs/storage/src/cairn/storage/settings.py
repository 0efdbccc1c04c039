"""How a service reaches Postgres (env prefix `CAIRN_POSTGRES_`)."""

from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class PostgresSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_POSTGRES_", extra="ignore")

    url: SecretStr = SecretStr("postgresql://cairn_app@127.0.0.1:5432/cairn")
    admin_url: SecretStr | None = None  # owner/superuser: migrations only, never a service
    app_password: SecretStr | None = None  # set on the cairn_app and cairn_projector roles by `cairn migrate`
    # Projections log in as cairn_projector (see `tenant_batch` in platform/schema/V0001__baseline.sql); by default
    # `url` with that user instead.
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
