"""The deployment's model (`CAIRN_LLM_*`), read by every service that asks a model something."""

import json
from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class LlmSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_LLM_", extra="ignore")

    base_url: str | None = Field(
        default=None,
        description="an OpenAI-compatible API's base URL, e.g. http://127.0.0.1:11434/v1 (/chat/completions is "
        "appended); unset: no model, the callers' no-model path",
    )
    model: str | None = Field(default=None, description="the model name sent with every call")
    api_key: SecretStr | None = Field(default=None, description="sent as `Authorization: Bearer`; unset: none")
    timeout_s: float = Field(default=30.0, gt=0, le=600, description="a call's total bound, connect to last byte")
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="hosts (names or IPs, exact) a tenant's model override may point at; empty: no overrides",
    )

    @field_validator("base_url", "model", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        """Compose and Kubernetes pass every variable, empty when the operator set none."""
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("api_key", mode="before")
    @classmethod
    def _empty_key_is_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        """`CAIRN_LLM_ALLOWED_HOSTS=llm.internal,10.0.0.7` (a JSON list is accepted too)."""
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [part.strip() for part in text.split(",") if part.strip()]
        return value

    @property
    def configured(self) -> bool:
        """A deployment default exists: both a base URL and a model."""
        return bool(self.base_url and self.model)
