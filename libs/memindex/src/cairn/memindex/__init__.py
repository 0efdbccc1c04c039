"""The memory index: chunks of memory documents and remembered transcripts with their full-text terms
and embeddings. The indexer writes it, recall queries it, the CLI rebuilds and measures it."""

from cairn.memindex.embeddings import (
    Embedder,
    LocalEmbedder,
    NoEmbedder,
    OpenAICompatibleEmbedder,
    Vectors,
    create_embedder,
)
from cairn.memindex.indexing import MemoryIndex, dated_note
from cairn.memindex.settings import EmbeddingSettings, MemoryIndexSettings

__all__ = [
    "Embedder",
    "EmbeddingSettings",
    "LocalEmbedder",
    "MemoryIndex",
    "MemoryIndexSettings",
    "NoEmbedder",
    "OpenAICompatibleEmbedder",
    "Vectors",
    "create_embedder",
    "dated_note",
]
