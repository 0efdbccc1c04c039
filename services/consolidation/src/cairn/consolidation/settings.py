"""Settings of the consolidation service (env prefix CAIRN_)."""

from pydantic import Field

from cairn.edge.settings import HttpSettings, http_defaults
from cairn.llm import LlmSettings
from cairn.platform.settings import ServiceSettings


class ConsolidationSettings(ServiceSettings):
    http: HttpSettings = Field(default_factory=http_defaults(8085))
    llm: LlmSettings = Field(default_factory=LlmSettings)
    snapshot_messages: int = Field(
        default=15, ge=1, le=200, description="user/assistant messages kept in a reset snapshot"
    )
    flush_poll_s: float = Field(default=1.0, gt=0, le=60, description="how often due memory flushes are looked for")
    flush_retry_first_s: float = Field(
        default=5.0, gt=0, le=600, description="a failed flush's first wait; each further failure doubles it (≤ 1 h)"
    )
    flush_no_model_recheck_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="how soon a flush waiting for a tenant's model looks again (later: as long as it waited, ≤ 1 h)",
    )
