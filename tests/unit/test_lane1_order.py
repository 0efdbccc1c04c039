"""Lane 1 lists its candidates, and picks its strong items, in the order of the scores they show: memory search
sorts MMR's picks by score, so a near-duplicate entry that MMR took after a less similar one comes before it."""

import asyncio
import uuid
from collections.abc import Awaitable, Sequence

import numpy as np

from cairn.recall.memory_queries import ChunkDetail, MemoryReads, Where
from cairn.recall.memory_ranking import RankingOptions
from cairn.recall.memory_search import MemorySearch
from cairn.recall.recall_lanes import lane1

QUERY = np.array([1.0, 0.0, 0.0], dtype=np.float32)


def _unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def _entry(key: str, line: int, text: str, vector: np.ndarray) -> ChunkDetail:
    return ChunkDetail(
        chunk_id=key, source="memory", path="MEMORY.md", session_key=None, session_id=None, start_line=line,
        end_line=line, text=text, message_ids=[], external_ids=[], dated=None, occurred_at=None, embedding=vector,
        present=frozenset(), lexemes=None,
    )  # fmt: skip


FIRST, TWIN, OTHER = (str(uuid.UUID(int=i)) for i in (1, 2, 3))
ENTRIES = [
    _entry(FIRST, 1, "- drinks green tea every morning", _unit(0.9, 0.436, 0.0)),
    _entry(TWIN, 2, "- every morning a cup of green tea", _unit(0.85, 0.5, 0.05)),  # nearly the first one
    _entry(OTHER, 3, "- prefers coffee after lunch", _unit(0.6, -0.5, 0.624)),
]


class _Reads:
    """Trusted entries found by the vector side only, each bringing its row."""

    async def lexical_rows(self, *_: object) -> tuple[dict[str, float], list[ChunkDetail]]:
        return {}, []

    async def vector_rows_when_ready(
        self, where: Where, query: Awaitable[Sequence[float] | None], model: str, limit: int, asked: Sequence[str]
    ) -> tuple[dict[str, float], list[ChunkDetail]]:
        vector = np.array(await query, dtype=np.float32)
        return {c.chunk_id: float(c.embedding @ vector) for c in ENTRIES if c.embedding is not None}, ENTRIES


class _Embedder:
    provider, model, dimensions = "test", "test-model", 3

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([QUERY for _ in texts])


def test_lane_1_candidates_and_strong_items_follow_their_scores() -> None:
    reads: MemoryReads = _Reads()  # type: ignore[assignment]
    search = MemorySearch(reads, _Embedder(), RankingOptions())
    found = asyncio.run(lane1(search, str(uuid.uuid4()), "main", "morning drink?", 0.5))
    assert [c["lines"] for c in found.candidates] == [[1, 1], [2, 2], [3, 3]]
    scores = [c["score"] for c in found.candidates]
    assert scores == sorted(scores, reverse=True)
    assert [(c.start_line, c.score) for c in found.strong] == [(1, scores[0]), (2, scores[1])]
