"""Pure ranking of memory search candidates: fusion of the lexical and vector sides, time decay of dated
notes, maximal marginal relevance (MMR) so that near-duplicates do not fill the list, and the ranking of
the messages of remembered conversations across all hits. No I/O."""

import heapq
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date
from typing import Literal

import numpy as np

from cairn.memindex import Vectors

Fusion = Literal["weighted", "rrf"]
RRF_K = 60


@dataclass(frozen=True)
class Candidate:
    """A chunk found by either side. `lexical` is its full-text rank (0 when the words did not match),
    `vector` its cosine similarity to the query (None without a vector of the query's model)."""

    key: str
    lexical: float
    vector: float | None
    dated: date | None
    terms: frozenset[str]
    score: float = 0.0
    coverage: float = 1.0  # weighted share of the query's terms the chunk contains


@dataclass(frozen=True)
class RankingOptions:
    fusion: Fusion = "weighted"
    vector_weight: float = 0.7
    half_life_days: float = 30.0
    mmr_lambda: float = 0.7


def fuse(candidates: Sequence[Candidate], options: RankingOptions) -> list[Candidate]:
    """Each candidate scored in [0, 1]. Weighted: cosine and the lexical rank scaled by the best lexical
    rank of this query. RRF: reciprocal ranks on both sides, scaled so that first on both sides is 1."""
    if not candidates:
        return []
    has_vectors = any(c.vector is not None for c in candidates)
    weight = options.vector_weight if has_vectors else 0.0
    if options.fusion == "rrf":
        lexical_rank = _ranks([c.lexical for c in candidates])
        vector_rank = _ranks([c.vector or 0.0 for c in candidates])
        best = (1 - weight) / (RRF_K + 1) + weight / (RRF_K + 1)
        scored = [
            (1 - weight) * _reciprocal(lexical_rank[i], c.lexical > 0) + weight * _reciprocal(vector_rank[i], c.vector)
            for i, c in enumerate(candidates)
        ]
        return [replace(c, score=s / best) for c, s in zip(candidates, scored, strict=True)]
    top = max(c.lexical for c in candidates) or 1.0
    return [
        replace(c, score=(1 - weight) * c.coverage * c.lexical / top + weight * max(c.vector or 0.0, 0.0))
        for c in candidates
    ]


# Words that carry little meaning of their own: a chunk matching only these matched almost nothing.
_FUNCTION_WORDS = """a an and are as at be but by can did do does for from had has have he her him his how i if in
    is it its me my of on or our she so that the their them they this to was we were what when where which who why
    will with you your 的 了 是 在 我 你 他 她 吗 呢 吧 和 也 都 就 有"""
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS.split())
MINOR_WEIGHT = 0.1


def coverage(query_terms: Sequence[str], chunk_terms: frozenset[str]) -> float:
    """Weighted share of the query's terms found in the chunk; function words weigh a tenth."""
    weights = {term: MINOR_WEIGHT if term in FUNCTION_WORDS else 1.0 for term in query_terms}
    total = sum(weights.values())
    return sum(w for term, w in weights.items() if term in chunk_terms) / total if total else 0.0


def _ranks(values: Sequence[float]) -> list[int]:
    order = sorted(range(len(values)), key=lambda i: -values[i])
    ranks = [0] * len(values)
    for rank, index in enumerate(order, start=1):
        ranks[index] = rank
    return ranks


def _reciprocal(rank: int, present: object) -> float:
    return 1.0 / (RRF_K + rank) if present else 0.0


def decay(candidates: Sequence[Candidate], today: date, half_life_days: float) -> list[Candidate]:
    """Dated notes lose half their score every `half_life_days`; undated ones (MEMORY.md, bank files,
    transcripts) keep it. A note dated in the future counts as today's."""
    return [
        c if c.dated is None else replace(c, score=c.score * 0.5 ** (max((today - c.dated).days, 0) / half_life_days))
        for c in candidates
    ]


def mmr(candidates: Sequence[Candidate], vectors: dict[str, Vectors], limit: int, lambda_: float) -> list[Candidate]:
    """Greedy MMR: the next pick maximises `λ·score − (1−λ)·max similarity to the picks so far`. Similarity
    is the cosine of the chunks' vectors, or the Jaccard overlap of their terms when one has none."""
    pool = sorted(candidates, key=lambda c: -c.score)
    if not pool:
        return []
    similar = _similarities(pool, vectors)
    scores = np.array([c.score for c in pool])
    redundancy = np.full(len(pool), -np.inf)  # nothing picked yet: no penalty
    open_ = np.ones(len(pool), dtype=bool)
    picked: list[int] = []
    while len(picked) < min(limit, len(pool)):
        value = lambda_ * scores - (1 - lambda_) * np.maximum(redundancy, 0.0)
        value[~open_] = -math.inf
        best = int(np.argmax(value))
        picked.append(best)
        open_[best] = False
        redundancy = np.maximum(redundancy, similar[best])
    return [pool[i] for i in picked]


def keep_best_messages(
    picked: Sequence[Candidate],
    candidates: Sequence[Candidate],
    held: Mapping[str, Sequence[str]],
    messages: dict[str, float],
    limit: int,
) -> list[Candidate]:
    """MMR's picks, changed so that the best `limit` messages of the transcript candidates are all listed.
    MMR tells chunks apart by their vectors, so it leaves out a chunk much like one it picked, and a message
    only that chunk holds (chunks overlap by a few lines, not more) would vanish however well it ranks on its
    own. Such a message brings back its best chunk in place of the last transcript pick that holds none of
    those messages; documents are never given up. `held` maps each transcript candidate to its messages,
    `messages` scores them (`rank_turns`); a caller that ranks messages across hits by their scores then
    reads the same first `limit` as if every candidate chunk had been listed. LoCoMo `--mode memory` (limit 50,
    quality18): the top 50 messages of 72 of 497 questions missed some of the full ranking's (of 3 in their top
    10), now of none; session R@5 0.925 and turn R@10 0.818 unchanged; at limit 6, 63 searches of 497 swap in a
    chunk. It costs ~0.3 ms a search at limit 6, ~0.6-1.1 ms at limit 50 (load 5-6)."""
    chosen = list(picked)
    eligible = {m for c in candidates for m in held.get(c.key, ())}
    best = heapq.nlargest(limit, (m for m in messages if m in eligible), key=lambda m: messages[m])  # stable
    listed = {m for c in chosen for m in held.get(c.key, ())}
    missing = [m for m in best if m not in listed]
    if not missing:
        return chosen
    wanted = set(best)
    by_score = sorted(candidates, key=lambda c: -c.score)  # stable: the first of equals holds
    for message in missing:
        if message in listed:
            continue
        spare = [i for i, c in enumerate(chosen) if c.key in held and wanted.isdisjoint(held[c.key])]
        if not spare:
            break
        holder = next(c for c in by_score if message in held.get(c.key, ()))
        chosen[spare[-1]] = holder
        listed |= set(held[holder.key])
    return chosen


def _similarities(pool: Sequence[Candidate], vectors: dict[str, Vectors]) -> np.ndarray:
    """Pairwise similarity of the candidates: one matrix product when all have vectors."""
    if all(c.key in vectors for c in pool):
        matrix = np.stack([vectors[c.key] for c in pool])
        similar: np.ndarray = matrix @ matrix.T
        return similar
    return np.array([[_similarity(a, b, vectors) for b in pool] for a in pool])


def _similarity(a: Candidate, b: Candidate, vectors: dict[str, Vectors]) -> float:
    va, vb = vectors.get(a.key), vectors.get(b.key)
    if va is not None and vb is not None:
        return float(np.dot(va, vb))
    union = a.terms | b.terms
    return len(a.terms & b.terms) / len(union) if union else 0.0


@dataclass(frozen=True)
class Turn:
    """One remembered message of the transcript candidates: its index terms (repeats kept; those of the
    query suffice), its length (None: the number of its terms), the query's cosine with its own vector (0
    without vectors), `context`, the best fused score of a chunk holding it, and `conversation`, the
    sitting it was said in."""

    key: str
    terms: Sequence[str]
    cosine: float
    context: float
    length: int | None = None
    conversation: str | None = None  # the sitting it was said in (None: a conversation of its own)


@dataclass(frozen=True)
class TurnWeights:
    """How a message's score is made: its conversation's score (the chunk around it), its own words (BM25
    over the candidate messages, scaled by the best), its own meaning, and a share of its best neighbour's
    score (an answer follows its question). Chosen on LoCoMo turn R@10 with a coarse grid (memquality6).
    `conversation` is the share of the words of its whole sitting (BM25 of the candidate lines of each
    sitting taken as one document, scaled by the best): a sitting where several lines speak of what is asked
    lifts all of them above a lucky line elsewhere (LoCoMo, 0.1–0.2 alike: session R@5 0.898 → 0.903,
    turn R@10 0.799 → 0.814 at 0.15; memquality7). `meaning` 0.4 (was 0.2): a message that says what is asked
    in other words is not buried under the small talk of a chunk that fused a little better; sittings are
    ranked by their best message, so this finds the second and third sitting of a many-part question (LoCoMo:
    session R@5 0.903 → 0.907, multi-hop 0.616 → 0.639; turn R@10 0.814 → 0.803; 0.4–0.8 alike; memquality8).
    `meaning_in_context`: a message's meaning is the mean cosine of its line and the lines beside it in its
    conversation, not its line's alone. A short answer ("they loved the dinosaur exhibit") says what is asked
    only with the question before it, and one line's vector is noisy; the window's is steadier, so it earns a
    larger share: `meaning` 0.4 → 1.0 (LoCoMo `--mode memory`, quality16: session R@5 0.907 → 0.912, turn R@10
    0.803 → 0.819, multi-hop and session R@1 unchanged within a question; replayed offline 0.8–1.2 alike at
    0.915–0.917, while with the line's own cosine no share from 0.4 to 1.2 beat 0.907). `conversation`
    0.15 → 0.1 once a turn's own vector reads it after the line before it (`turn_in_context`): its meaning is
    steadier, so the sitting's words need not outvote it (LoCoMo `--mode memory`, quality17: session R@5
    0.918 → 0.925, multi-hop 0.646 → 0.664, session R@1 0.724 → 0.730, turn R@10 0.815 → 0.818; retuned on
    LoCoMo itself: 5 questions up, none down; offline 0.075 and 0.125 gave 0.922, 0.05 0.919, 0 0.912)."""

    context: float = 1.0
    words: float = 0.3
    meaning: float = 1.0
    neighbour: float = 0.2
    conversation: float = 0.1
    meaning_in_context: bool = True


BM25_K1, BM25_B = 1.2, 0.75


def bm25(
    query: Sequence[tuple[str, float]], documents: Sequence[Sequence[str]], lengths: Sequence[int] | None = None
) -> np.ndarray:
    """Okapi BM25 of weighted query lexemes over short documents, the documents themselves as the corpus
    (document frequency and average length are those of this set). A document's length is its number of
    terms unless `lengths` says otherwise (when documents hold only the query's terms)."""
    scores = np.zeros(len(documents))
    if not documents or not query:
        return scores
    counts = [Counter(terms) for terms in documents]
    size = np.array(lengths if lengths is not None else [len(terms) for terms in documents], dtype=float)
    norm = BM25_K1 * (1 - BM25_B + BM25_B * size / max(float(size.mean()), 1.0))
    for lexeme, weight in query:
        tf = np.array([c.get(lexeme, 0) for c in counts], dtype=float)
        df = int(np.count_nonzero(tf))
        if df:
            idf = math.log(1 + (len(documents) - df + 0.5) / (df + 0.5))
            scores += weight * idf * tf * (BM25_K1 + 1) / (tf + norm)
    return scores


def rank_turns(
    turns: Sequence[Turn],
    query: Sequence[tuple[str, float]],
    adjacent: Sequence[tuple[str, str]],
    weights: TurnWeights = TurnWeights(),
) -> dict[str, float]:
    """Every message's score in [0, 1]: its conversation's score, its words and its meaning, then a share
    of its best neighbour's (`adjacent` pairs follow each other in a conversation), then a share of the
    words of its sitting."""
    if not turns:
        return {}
    lengths = [len(t.terms) if t.length is None else t.length for t in turns]
    words = bm25(query, [t.terms for t in turns], lengths)
    words = words / (words.max() or 1.0)
    sitting = _sitting_words(turns, lengths, query)
    meaning = _meaning_in_context(turns, adjacent) if weights.meaning_in_context else {t.key: t.cosine for t in turns}
    own = {
        t.key: weights.context * t.context + weights.words * float(words[i]) + weights.meaning * max(meaning[t.key], 0)
        for i, t in enumerate(turns)
    }
    best_neighbour = dict.fromkeys(own, 0.0)
    for a, b in adjacent:
        if a in own and b in own:
            best_neighbour[a] = max(best_neighbour[a], own[b])
            best_neighbour[b] = max(best_neighbour[b], own[a])
    top = (weights.context + weights.words + weights.meaning) * (1 + weights.neighbour)
    return {
        t.key: ((own[t.key] + weights.neighbour * best_neighbour[t.key]) / top + weights.conversation * sitting[i])
        / (1 + weights.conversation)
        for i, t in enumerate(turns)
    }


def _meaning_in_context(turns: Sequence[Turn], adjacent: Sequence[tuple[str, str]]) -> dict[str, float]:
    """Each message's cosine averaged with those of the messages beside it (each neighbour counted once,
    however many overlapping chunks pair them)."""
    cosine = {t.key: t.cosine for t in turns}
    around: dict[str, set[str]] = {key: set() for key in cosine}
    for a, b in adjacent:
        if a in cosine and b in cosine and a != b:
            around[a].add(b)
            around[b].add(a)
    return {key: (cosine[key] + sum(cosine[n] for n in around[key])) / (1 + len(around[key])) for key in cosine}


def _sitting_words(turns: Sequence[Turn], lengths: Sequence[int], query: Sequence[tuple[str, float]]) -> list[float]:
    """For every message, BM25 of its sitting's candidate lines taken as one document among the sittings,
    scaled by the best sitting's (a message without a sitting is a sitting of its own)."""
    members: dict[str, list[int]] = {}
    for i, turn in enumerate(turns):
        members.setdefault(turn.conversation or f"\0{turn.key}", []).append(i)
    groups = list(members.values())
    documents = [[term for i in group for term in turns[i].terms] for group in groups]
    scores = bm25(query, documents, [sum(lengths[i] for i in group) for group in groups])
    scores = scores / (scores.max() or 1.0)
    out = [0.0] * len(turns)
    for group, value in zip(groups, scores, strict=True):
        for i in group:
            out[i] = float(value)
    return out
