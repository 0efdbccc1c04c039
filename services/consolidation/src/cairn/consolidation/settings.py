"""Settings of the consolidation service (env prefix CAIRN_)."""

from pydantic import Field

from cairn.platform.settings import HttpSettings, ServiceSettings, http_defaults


class ConsolidationSettings(ServiceSettings):
    http: HttpSettings = Field(default_factory=http_defaults(8085))
    snapshot_messages: int = Field(
        default=15, ge=1, le=200, description="user/assistant messages kept in a reset snapshot"
    )
