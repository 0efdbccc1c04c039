"""Memory search: lexical and vector candidates → fusion → decay of dated notes → MMR → results with
snippets and citations. The route only validates and serialises."""

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import quote, urlencode

import numpy as np

from cairn.memindex import Embedder
from cairn.memindex.embeddings import RemoteEmbeddingError
from cairn.recall.memory_queries import ChunkDetail, MemoryReads, Where
from cairn.recall.memory_ranking import Candidate, RankingOptions, coverage, decay, fuse, mmr
from cairn.text import build_query, index_terms, query_terms, snippet

log = logging.getLogger(__name__)

SNIPPET_CHARS = 700
CANDIDATES_PER_RESULT = 4  # each side proposes this many candidates per asked result
MIN_CANDIDATES = 24


@dataclass(frozen=True)
class MemoryQuery:
    agent: str
    text: str
    limit: int
    min_score: float | None
    sources: tuple[str, ...]
    caller_session_key: str | None


@dataclass(frozen=True)
class Hit:
    detail: ChunkDetail
    score: float
    snippet: str
    citation: str


@dataclass
class Found:
    hits: list[Hit]
    fallbacks: list[str] = field(default_factory=list)


class MemorySearch:
    def __init__(self, reads: MemoryReads, embedder: Embedder, options: RankingOptions) -> None:
        self._reads, self._embedder, self._options = reads, embedder, options

    async def search(self, tenant: str, query: MemoryQuery) -> Found:
        where = Where(tenant, query.agent, query.sources, query.caller_session_key)
        pool = max(query.limit * CANDIDATES_PER_RESULT, MIN_CANDIDATES)
        parsed = build_query(query.text)
        found = Found([])
        lexical_task = asyncio.ensure_future(  # the SQL runs while the query is embedded
            self._reads.lexical(where, parsed.any_terms, parsed.all_terms, pool) if parsed else _nothing()
        )
        query_vector, vector_hits = await self._vector_side(where, query.text, pool, found)
        lexical = await lexical_task
        ids = list(dict.fromkeys([*lexical, *vector_hits]))
        if not ids:
            return found
        details = {d.chunk_id: d for d in await self._reads.details(tenant, ids, self._embedder.model)}
        candidates, vectors = self._candidates(details, lexical, query_vector, query_terms(query.text))
        ranked = decay(fuse(candidates, self._options), datetime.now(UTC).date(), self._options.half_life_days)
        if query.min_score is not None:
            ranked = [c for c in ranked if round(c.score, 6) >= query.min_score]  # as reported
        picked = mmr(ranked, vectors, query.limit, self._options.mmr_lambda)
        terms = parsed.terms if parsed else ()
        found.hits = [self._hit(details[c.key], c.score, terms, query.agent) for c in picked]
        return found

    async def _vector_side(
        self, where: Where, text: str, pool: int, found: Found
    ) -> tuple[np.ndarray | None, dict[str, float]]:
        model = self._embedder.model
        if model is None:
            found.fallbacks.append("lexical only: no embedding provider is configured")
            return None, {}
        try:
            vector = (await self._embedder.embed([text]))[0]
        except RemoteEmbeddingError as error:
            log.warning("query embedding failed, searching lexically: %s", error)
            found.fallbacks.append(f"lexical only for this query: the embedding provider failed ({error})")
            return None, {}
        return vector, await self._reads.vector(where, vector.tolist(), model, pool)

    @staticmethod
    def _candidates(
        details: dict[str, ChunkDetail],
        lexical: dict[str, float],
        query_vector: np.ndarray | None,
        wanted: Sequence[str],
    ) -> tuple[list[Candidate], dict[str, np.ndarray]]:
        """Both scores for every candidate: a chunk found by one side is scored by the other one too."""
        vectors = {k: np.asarray(d.embedding, dtype=np.float32) for k, d in details.items() if d.embedding}
        candidates = []
        for key, detail in details.items():
            terms = frozenset(index_terms(detail.text))
            similarity = None
            if query_vector is not None and key in vectors:
                similarity = float(np.dot(vectors[key], query_vector))
            candidates.append(
                Candidate(key, lexical.get(key, 0.0), similarity, detail.dated, terms, coverage=coverage(wanted, terms))
            )
        return candidates, vectors

    @staticmethod
    def _hit(detail: ChunkDetail, score: float, terms: Sequence[str], agent: str) -> Hit:
        return Hit(detail, round(score, 6), snippet(detail.text, terms, SNIPPET_CHARS), citation(detail, agent))


def citation(detail: ChunkDetail, agent: str) -> str:
    """A URL of the query API that opens what the hit was cut from, at the hit's place."""
    if detail.source == "memory" and detail.path is not None:
        lines = detail.end_line - detail.start_line + 1
        query = urlencode({"agent_id": agent, "from": detail.start_line, "lines": lines})
        return f"/v1/memory/files/{quote(detail.path)}?{query}"
    anchor = {"agent_id": agent, "session_id": detail.session_id or ""}
    if detail.message_ids:
        anchor["message_id"] = detail.message_ids[0]
    return f"/v1/sessions/{quote(detail.session_key or '', safe=':')}/history?{urlencode(anchor)}"


async def _nothing() -> dict[str, float]:
    return {}
