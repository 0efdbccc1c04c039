"""Memory search: lexical and vector candidates → fusion → decay of dated notes → MMR → results with
snippets and citations. The route only validates and serialises.

A transcript chunk holds about twenty turns and its vector is their average; each remembered turn also
has a vector of its own, so a conversation chunk is scored by its own vector and its best turn, and its
messages are listed most relevant first.
"""

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from urllib.parse import quote, urlencode

import numpy as np

from cairn.memindex import Embedder
from cairn.memindex.embeddings import RemoteEmbeddingError
from cairn.recall.memory_dates import Day, days_named, month_days, on_day
from cairn.recall.memory_queries import ChunkDetail, MemoryReads, Where
from cairn.recall.memory_ranking import Candidate, RankingOptions, coverage, decay, fuse, mmr
from cairn.text import build_query, index_terms, query_terms, snippet

log = logging.getLogger(__name__)

SNIPPET_CHARS = 700
CANDIDATES_PER_RESULT = 3  # each side proposes this many candidates per asked result
MIN_CANDIDATES, MAX_CANDIDATES = 24, 100
DAY_BONUS = 0.4
TURN_WEIGHT = 0.5  # share of a transcript chunk's vector score that comes from its best turn

Vector = np.ndarray


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


@dataclass(frozen=True)
class _Scored:
    """What the ranking needs besides the chunks: the query's vector and terms, and each turn's cosine."""

    query_vector: Vector | None
    wanted: list[str]
    turn_cosine: dict[str, float]


class MemorySearch:
    def __init__(self, reads: MemoryReads, embedder: Embedder, options: RankingOptions) -> None:
        self._reads, self._embedder, self._options = reads, embedder, options

    async def search(self, tenant: str, query: MemoryQuery) -> Found:
        where = Where(tenant, query.agent, query.sources, query.caller_session_key)
        pool = min(max(query.limit * CANDIDATES_PER_RESULT, MIN_CANDIDATES), MAX_CANDIDATES)
        parsed = build_query(query.text)
        found = Found([])
        lexical_task = asyncio.ensure_future(  # the SQL runs while the query is embedded
            self._reads.lexical(where, parsed.any_terms, parsed.all_terms, pool) if parsed else _nothing()
        )
        query_vector, vector_hits = await self._vector_side(where, query.text, pool, found)
        lexical = await lexical_task
        days = days_named(query.text)
        dated = await self._reads.on_days(where, month_days(days), pool) if days else []
        ids = list(dict.fromkeys([*lexical, *vector_hits, *dated]))
        if not ids:
            return found
        wanted = query_terms(query.text)
        model, asked_vector = self._embedder.model, None if query_vector is None else query_vector.tolist()
        rows, turn_cosine = await self._reads.details(tenant, ids, model, wanted, list(lexical), asked_vector)
        details = {d.chunk_id: d for d in rows}
        scored = _Scored(query_vector, wanted, turn_cosine)
        candidates, vectors = _candidates(details, lexical, scored)
        fused = _on_named_days(fuse(candidates, self._options), details, days)
        ranked = decay(fused, datetime.now(UTC).date(), self._options.half_life_days)
        if query.min_score is not None:
            ranked = [c for c in ranked if round(c.score, 6) >= query.min_score]  # as reported
        picked = mmr(ranked, vectors, query.limit, self._options.mmr_lambda)
        terms = parsed.terms if parsed else ()
        found.hits = [self._hit(_by_relevance(details[c.key], scored), c.score, terms, query.agent) for c in picked]
        return found

    async def _vector_side(
        self, where: Where, text: str, pool: int, found: Found
    ) -> tuple[Vector | None, dict[str, float]]:
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
    def _hit(detail: ChunkDetail, score: float, terms: Sequence[str], agent: str) -> Hit:
        return Hit(detail, round(score, 6), snippet(detail.text, terms, SNIPPET_CHARS), citation(detail, agent))


def _candidates(
    details: dict[str, ChunkDetail], lexical: dict[str, float], scored: _Scored
) -> tuple[list[Candidate], dict[str, Vector]]:
    """Both scores for every candidate: a chunk found by one side is scored by the other one too."""
    vectors = {k: d.embedding for k, d in details.items() if d.embedding is not None}
    candidates = []
    for key, detail in details.items():
        matched = lexical.get(key, 0.0)
        # all of a chunk's terms come only for a lexical match or a chunk without a vector (see DETAILS)
        terms = detail.lexemes or frozenset()
        similarity = None
        if scored.query_vector is not None and key in vectors:
            similarity = float(np.dot(vectors[key], scored.query_vector))
            turns = [scored.turn_cosine[m] for m in detail.message_ids if m in scored.turn_cosine]
            if turns:
                similarity = (1 - TURN_WEIGHT) * similarity + TURN_WEIGHT * max(turns)
        share = coverage(scored.wanted, detail.present) if matched else 0.0
        candidates.append(Candidate(key, matched, similarity, detail.dated, terms, coverage=share))
    return candidates, vectors


def _on_named_days(candidates: list[Candidate], details: dict[str, ChunkDetail], days: set[Day]) -> list[Candidate]:
    """A chunk from a day the query names gains DAY_BONUS of the distance to a perfect score."""
    if not days:
        return candidates
    return [
        replace(c, score=c.score + DAY_BONUS * (1 - c.score))
        if on_day(details[c.key].dated or details[c.key].occurred_at, days)
        else c
        for c in candidates
    ]


def _by_relevance(detail: ChunkDetail, scored: _Scored) -> ChunkDetail:
    """A transcript chunk's messages, most relevant first: the turn's cosine and its share of the query's
    words (each line of the chunk is one turn, unless a long turn was cut into pieces)."""
    if detail.source != "sessions" or len(detail.message_ids) < 2:
        return detail
    lines = detail.text.split("\n")
    words = [coverage(scored.wanted, frozenset(index_terms(line))) for line in lines]
    if len(words) != len(detail.message_ids):
        words = [0.0] * len(detail.message_ids)
    relevance = [0.7 * scored.turn_cosine.get(m, 0.0) + 0.3 * words[i] for i, m in enumerate(detail.message_ids)]
    order = sorted(range(len(relevance)), key=lambda i: -relevance[i])
    external = detail.external_ids if len(detail.external_ids) == len(detail.message_ids) else []
    return replace(
        detail,
        message_ids=[detail.message_ids[i] for i in order],
        external_ids=[external[i] for i in order] if external else detail.external_ids,
    )


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
