"""Settings of the indexer service."""

from pydantic import Field

from cairn.edge.settings import HttpSettings, http_defaults
from cairn.memindex import EmbeddingSettings, MemoryIndexSettings
from cairn.platform.settings import ServiceSettings


class IndexerSettings(ServiceSettings):
    http: HttpSettings = Field(default_factory=http_defaults(8083))
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    memory: MemoryIndexSettings = Field(default_factory=MemoryIndexSettings)
