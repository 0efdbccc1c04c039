"""Settings of the recall service."""

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from cairn.edge.settings import HttpSettings, http_defaults
from cairn.llm import LlmSettings
from cairn.memindex import EmbeddingSettings
from cairn.platform.settings import ServiceSettings


class MemorySearchSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_MEMORY_SEARCH_", extra="ignore")

    fusion: Literal["weighted", "rrf"] = "weighted"
    vector_weight: float = Field(default=0.7, ge=0, le=1)
    half_life_days: float = Field(default=30.0, gt=0, description="dated notes lose half their score per half-life")
    mmr_lambda: float = Field(default=0.7, ge=0, le=1, description="1 = relevance only, lower = more diversity")


class RecallTraceSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_RECALL_TRACE_", extra="ignore")

    retention_days: float = Field(default=30.0, ge=1, le=3650, description="traces older than this are deleted")
    sweep_every_s: float = Field(default=3600.0, gt=0, description="how often the retention sweep runs")
    save_wait_s: float = Field(
        default=0.1, ge=0, le=2, description="how long a recall's answer waits for its trace to be stored at most"
    )
    store_within_s: float = Field(default=5.0, gt=0, le=60, description="bound of storing or publishing a trace")


class RecallSettings(ServiceSettings):
    http: HttpSettings = Field(default_factory=http_defaults(8084))
    llm: LlmSettings = Field(default_factory=LlmSettings)
    consistency_wait_s: float = Field(default=5.0, ge=0, le=30, description="bound of a read-your-writes wait")
    agent_config_fresh_s: float = Field(
        default=5.0, ge=0, le=60, description="how long recall uses an agent's config before reading it again"
    )
    dead_letters_wait_s: float = Field(
        default=1.0, gt=0, le=10, description="bound of the dead-letter count in memory status (NATS may be away)"
    )
    max_response_bytes: int = Field(default=32 * 1024, ge=1024)
    history_max_bytes: int = Field(default=80 * 1024, ge=8 * 1024, description="cap of a history response")
    history_text_chars: int = Field(default=4000, ge=100, description="cap of one text block in history")
    search_candidates: int = Field(
        default=1000, ge=100, description="most recent matches a search ranks at most (all of them below this)"
    )
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    memory_search: MemorySearchSettings = Field(default_factory=MemorySearchSettings)
    trace: RecallTraceSettings = Field(default_factory=RecallTraceSettings)
