"""A recall process embeds a query text once while it is among the last `kept` texts; a failure is not kept."""

from collections.abc import Sequence

import numpy as np
import pytest

from cairn.memindex.embeddings import RemoteEmbeddingError, Vectors
from cairn.recall.query_vectors import QueryVectors


class CountingEmbedder:
    provider, model, dimensions = "counting", "counting-1", 4

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.failing = False

    async def embed(self, texts: Sequence[str]) -> Vectors:
        self.asked += texts
        if self.failing:
            raise RemoteEmbeddingError("the provider is away")
        return np.array([[len(t), 1, 0, 0] for t in texts], dtype=np.float32)


async def test_a_text_is_embedded_once_while_kept_and_again_once_forgotten() -> None:
    embedder = CountingEmbedder()
    vectors = QueryVectors(embedder, kept=2)
    first = await vectors.vector("harbour")
    assert (await vectors.vector("harbour")).tolist() == first.tolist()
    await vectors.vector("lighthouse")
    await vectors.vector("harbour")  # the most recent again: "lighthouse" is now the oldest
    await vectors.vector("budget")  # one too many: "lighthouse" is forgotten
    await vectors.vector("harbour")
    await vectors.vector("lighthouse")
    assert embedder.asked == ["harbour", "lighthouse", "budget", "lighthouse"]


async def test_a_failed_embedding_is_not_kept() -> None:
    embedder = CountingEmbedder()
    vectors = QueryVectors(embedder)
    embedder.failing = True
    with pytest.raises(RemoteEmbeddingError):
        await vectors.vector("harbour")
    embedder.failing = False
    assert (await vectors.vector("harbour")).tolist() == [7, 1, 0, 0]
    assert embedder.asked == ["harbour", "harbour"]
