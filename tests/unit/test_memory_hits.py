"""Which transcript chunks a memory search lists: MMR leaves out near-duplicates, but not the best messages."""

import asyncio
import uuid
from collections.abc import Awaitable, Sequence

import numpy as np

from cairn.recall.memory_queries import ChunkDetail, MemoryReads, Where
from cairn.recall.memory_ranking import Candidate, RankingOptions, keep_best_messages, mmr
from cairn.recall.memory_search import MemoryQuery, MemorySearch

QUERY = np.array([1.0, 0.0, 0.0], dtype=np.float32)


def _unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def _chunk(key: str, messages: list[str], lines: list[str], vector: np.ndarray) -> ChunkDetail:
    return ChunkDetail(
        chunk_id=key, source="sessions", path=None, session_key="agent:main:main", session_id=f"s-{key[:8]}",
        start_line=0, end_line=len(messages) - 1, text="\n".join(lines), message_ids=messages,
        external_ids=[None] * len(messages), dated=None, occurred_at=None, embedding=vector,
        present=frozenset(), lexemes=None,
    )  # fmt: skip


# Three sittings' chunks: the first and its near-duplicate (same small talk, nearly the same vector), and a
# different one. Only the near-duplicate holds the line that says what is asked.
FIRST, TWIN, OTHER = (str(uuid.UUID(int=i)) for i in (1, 2, 3))
CHUNKS = [
    _chunk(FIRST, ["f1", "f2"], ["User (Ana): hi there", "User (Bo): hello again"], _unit(0.9, 0.436, 0.0)),
    _chunk(TWIN, ["t1", "t2"], ["User (Ana): hi you", "User (Bo): I adopted a puppy"], _unit(0.85, 0.5, 0.05)),
    _chunk(OTHER, ["o1", "o2"], ["User (Ana): the weather", "User (Bo): rain all day"], _unit(0.6, -0.5, 0.624)),
]
TURN_COSINES = {"f1": 0.3, "f2": 0.5, "t1": 0.3, "t2": 0.5, "o1": 0.2, "o2": 0.2}


class _Reads:
    """The candidates come from the vector side only; each chunk brings its row."""

    async def lexical_rows(self, *_: object) -> tuple[dict[str, float], list[ChunkDetail]]:
        return {}, []

    async def vector_rows_when_ready(
        self, where: Where, query: Awaitable[Sequence[float] | None], model: str, limit: int, asked: Sequence[str]
    ) -> tuple[dict[str, float], list[ChunkDetail]]:
        vector = np.array(await query, dtype=np.float32)
        assert vector is not None
        return {c.chunk_id: float(c.embedding @ vector) for c in CHUNKS if c.embedding is not None}, CHUNKS

    async def turn_cosines(
        self, tenant: str, ids: Sequence[str], model: str, query: Sequence[float]
    ) -> dict[str, float]:
        return {m: TURN_COSINES[m] for m in ids}


class _Embedder:
    provider, model, dimensions = "test", "test-model", 3

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([QUERY for _ in texts])


def test_a_message_that_ranks_high_is_listed_though_mmr_left_out_its_near_duplicate_chunk() -> None:
    reads: MemoryReads = _Reads()  # type: ignore[assignment]
    search = MemorySearch(reads, _Embedder(), RankingOptions())
    query = MemoryQuery("main", "Which pet was adopted?", 2, None, ("sessions",), None)
    found = asyncio.run(search.search(str(uuid.uuid4()), query))
    scores = {m: s for h in found.hits for m, s in zip(h.detail.message_ids, h.message_scores, strict=True)}
    # MMR alone picks the first chunk and the different one: the puppy line would not be listed
    assert "t2" in scores
    assert max(scores, key=lambda m: scores[m]) == "t2"
    assert [h.detail.chunk_id for h in found.hits] == [FIRST, TWIN]


def test_mmr_alone_would_leave_the_near_duplicate_out() -> None:
    """The scenario above holds: λ 0.7 picks the different chunk over the near-duplicate."""
    pool = [
        Candidate(FIRST, 0, 0, None, frozenset(), score=0.49),
        Candidate(TWIN, 0, 0, None, frozenset(), score=0.47),
        Candidate(OTHER, 0, 0, None, frozenset(), score=0.28),
    ]
    vectors = {c.chunk_id: c.embedding for c in CHUNKS if c.embedding is not None}
    assert [c.key for c in mmr(pool, vectors, 2, 0.7)] == [FIRST, OTHER]


def test_the_best_messages_bring_back_their_chunk_in_place_of_the_last_pick_holding_none_of_them() -> None:
    a, b, c, d, doc = (Candidate(k, 0, 0, None, frozenset(), score=s) for k, s in
                       (("a", 0.9), ("b", 0.85), ("c", 0.5), ("d", 0.4), ("doc", 0.3)))  # fmt: skip
    held = {"a": ["a1", "a2"], "b": ["b1", "a2"], "c": ["c1"], "d": ["d1"]}
    messages = {"a1": 0.5, "a2": 0.4, "b1": 0.9, "c1": 0.2, "d1": 0.1}
    picked = [a, c, doc, d]
    # b1 ranks first: b replaces d (the last transcript pick holding none of b1, a1, a2, c1); the document stays
    assert [x.key for x in keep_best_messages(picked, [a, b, c, d, doc], held, messages, 4)] == ["a", "c", "doc", "b"]
    # best two messages (b1, a1): c and d hold neither; the last of them, d, gives way
    assert [x.key for x in keep_best_messages(picked, [a, b, c, d, doc], held, messages, 2)] == ["a", "c", "doc", "b"]
    # when every message of the best is listed, MMR's picks stand
    assert keep_best_messages([b, a, c], [a, b, c, d], held, messages, 3) == [b, a, c]
    # a chunk below `min_score` is no candidate: its messages are not among the best
    assert keep_best_messages(picked, [a, c, d, doc], held, messages, 4) == picked
    # a pick holding one of the best is never given up: nothing is left to replace
    assert keep_best_messages([a], [a, b], held, messages, 2) == [a]


def test_hits_are_listed_by_the_score_they_show_whatever_order_mmr_picked_them_in() -> None:
    reads: MemoryReads = _Reads()  # type: ignore[assignment]
    search = MemorySearch(reads, _Embedder(), RankingOptions())
    query = MemoryQuery("main", "Which pet was adopted?", 3, None, ("sessions",), None)
    found = asyncio.run(search.search(str(uuid.uuid4()), query))
    # MMR picks the different chunk second (away from the near-duplicate), which scores below the near-duplicate
    assert [h.detail.chunk_id for h in found.hits] == [FIRST, TWIN, OTHER]
    scores = [h.score for h in found.hits]
    assert scores == sorted(scores, reverse=True)
    assert len(set(scores)) == 3
