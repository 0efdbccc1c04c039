"""Settings of the consolidation service (env prefix CAIRN_)."""

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from cairn.edge.settings import HttpSettings, http_defaults
from cairn.events.extraction import KEY_PREFIX
from cairn.llm import LlmSettings
from cairn.memindex import EmbeddingSettings
from cairn.platform.settings import ServiceSettings


class ExtractionSettings(BaseSettings):
    """Model-based extraction after turns (env prefix CAIRN_EXTRACTION_): how turns are batched, how often a
    session may cost a model call, and which candidates are kept."""

    model_config = SettingsConfigDict(env_prefix="CAIRN_EXTRACTION_", extra="ignore")

    enabled: bool = Field(default=True, description="read transcript turns and extract candidates from them")
    debounce_s: float = Field(
        default=30.0, gt=0, le=3600, description="turns of one session this close together form one batch"
    )
    max_wait_s: float = Field(
        default=120.0, gt=0, description="a session that never pauses still gets a batch this long after its first turn"
    )
    max_batch_turns: int = Field(default=40, ge=1, le=500, description="turns sent to the model in one call at most")
    calls_per_hour: int = Field(default=20, ge=1, description="model calls one session may cost per clock hour")
    min_importance: float = Field(default=0.5, ge=0, le=1, description="candidates less important are dropped")
    poll_s: float = Field(default=1.0, gt=0, description="how often a replica looks for batches that are due")
    lease_s: float = Field(
        default=120.0, gt=0, description="a claimed batch another replica may take over once this has passed"
    )
    retry_first_s: float = Field(default=5.0, gt=0, description="first wait after the model could not be reached")
    retry_cap_s: float = Field(default=600.0, gt=0, description="longest wait between tries while the model is down")
    turn_chars: int = Field(default=2000, ge=100, description="a turn's text is cut to this many characters")
    keep_s: float = Field(
        default=7 * 86400.0, gt=0, description="a batch not extracted within this (model down for days) is let go"
    )
    answer_tokens: int = Field(default=1024, ge=64, description="max_tokens of the model's answer")
    key_prefix: str = Field(default=KEY_PREFIX, description="Redis keys of the debounce state start with this")


class ConsolidationSettings(ServiceSettings):
    http: HttpSettings = Field(default_factory=http_defaults(8085))
    llm: LlmSettings = Field(default_factory=LlmSettings)
    extraction: ExtractionSettings = Field(default_factory=ExtractionSettings)
    # the memory index's model (the same CAIRN_EMBEDDING_* variables): record vectors are compared by cosine
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
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

    @model_validator(mode="after")
    def _lease_outlasts_a_call(self) -> "ConsolidationSettings":
        """A batch whose lease ran out during its model call would be claimed, and paid for, twice."""
        if self.extraction.lease_s <= self.llm.timeout_s:
            raise ValueError(
                f"CAIRN_EXTRACTION_LEASE_S ({self.extraction.lease_s:g}) must be longer than CAIRN_LLM_TIMEOUT_S "
                f"({self.llm.timeout_s:g})"
            )
        return self
