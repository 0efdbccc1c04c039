"""Settings of the session service (env prefix CAIRN_SESSION_ for its own knobs)."""

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from cairn.edge.settings import HttpSettings, http_defaults
from cairn.platform.settings import ServiceSettings


def threshold_for(context_window: int, reserve_tokens: int, soft_threshold_tokens: int) -> int:
    """`context_window − reserve − soft threshold`, never below a tenth of the window."""
    return max(context_window - reserve_tokens - soft_threshold_tokens, context_window // 10)


class CompactionSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_SESSION_", extra="ignore")

    context_window: int = Field(default=200_000, ge=1000)
    reserve_tokens: int = Field(default=20_000, ge=0)
    soft_threshold_tokens: int = Field(default=4_000, ge=0)
    max_transcript_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)

    @property
    def threshold_tokens(self) -> int:
        return threshold_for(self.context_window, self.reserve_tokens, self.soft_threshold_tokens)


class SessionSettings(ServiceSettings):
    http: HttpSettings = Field(default_factory=http_defaults(8082))
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    snapshot_messages: int = Field(default=15, ge=1, description="messages carried with a reset boundary")
    dormant_after_days: float = Field(default=7, gt=0, description="quiet days before a session is dormant")
    archive_after_days: float = Field(default=90, gt=0, description="quiet days before it is archived")
    lifecycle_sweep_s: float = Field(default=300, gt=0, description="how often sessions are aged")
    partition_lease_s: float = Field(default=10.0, gt=1, description="how long a dead replica keeps its partitions")
