"""Settings of the consolidation service (env prefix CAIRN_)."""

from pydantic import Field

from cairn.edge.settings import HttpSettings, http_defaults
from cairn.llm import LlmSettings
from cairn.memindex import EmbeddingSettings
from cairn.platform.settings import ServiceSettings


class ConsolidationSettings(ServiceSettings):
    http: HttpSettings = Field(default_factory=http_defaults(8085))
    llm: LlmSettings = Field(default_factory=LlmSettings)
    # the memory index's model (the same CAIRN_EMBEDDING_* variables): record vectors are compared by cosine
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    snapshot_messages: int = Field(
        default=15, ge=1, le=200, description="user/assistant messages kept in a reset snapshot"
    )
