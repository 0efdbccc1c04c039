"""What `GET /v1/memory/status` says about work left after a model change: chunks and remembered messages waiting
for a vector of the configured model are named separately, each with what it costs a search meanwhile."""

from cairn.memindex.embeddings import NoEmbedder, OpenAICompatibleEmbedder
from cairn.memindex.settings import EmbeddingSettings
from cairn.recall.memory_api import _fallbacks


def _embedder() -> OpenAICompatibleEmbedder:
    return OpenAICompatibleEmbedder(
        EmbeddingSettings(provider="openai-compatible", url="http://127.0.0.1:9", model="embed-new")
    )


def test_stale_chunks_and_stale_messages_are_each_reported() -> None:
    embedder = _embedder()
    assert _fallbacks(embedder, 0, 0) == []
    chunks, messages = _fallbacks(embedder, 3, 0), _fallbacks(embedder, 0, 7)
    assert len(chunks) == 1
    assert "3 chunks are found by their words only" in chunks[0]
    assert len(messages) == 1
    assert "7 remembered messages are ranked without their own meaning" in messages[0]
    assert "embed-new" in messages[0]
    assert len(_fallbacks(embedder, 3, 7)) == 2


def test_without_a_provider_only_the_lexical_fallback_is_reported() -> None:
    assert _fallbacks(NoEmbedder(), 3, 7) == [
        "lexical only: no embedding provider is configured (CAIRN_EMBEDDING_PROVIDER=none)"
    ]
