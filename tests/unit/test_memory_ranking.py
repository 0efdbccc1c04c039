"""Memory search ranking, pure: fusion of both sides, decay of dated notes, MMR, and which sessions and
notes take part at all."""

from dataclasses import replace
from datetime import date

import numpy as np
import pytest

from cairn.cli.bench_retrieval import TOP, memory_then_sessions, rank_messages
from cairn.events import AgentConfig
from cairn.memindex import dated_note
from cairn.memindex.transcripts import is_remembered_session, remembers
from cairn.recall.memory_ranking import Candidate, RankingOptions, Turn, TurnWeights, bm25, decay, fuse, mmr, rank_turns
from cairn.recall.memory_search import _LineWords
from cairn.text import build_query, index_terms


def _c(key: str, lexical: float = 0.0, vector: float | None = None, dated: date | None = None) -> Candidate:
    return Candidate(key, lexical, vector, dated, frozenset(key.split()))


def test_weighted_fusion_adds_cosine_and_the_lexical_rank_scaled_by_the_best() -> None:
    fused = {c.key: c.score for c in fuse([_c("a", 2.0, 0.5), _c("b", 1.0, 0.9), _c("c", 0.0, 0.2)], RankingOptions())}
    assert fused["a"] == pytest.approx(0.3 * 1.0 + 0.7 * 0.5)
    assert fused["b"] == pytest.approx(0.3 * 0.5 + 0.7 * 0.9)
    assert fused["c"] == pytest.approx(0.7 * 0.2)


def test_without_vectors_the_lexical_side_alone_ranks() -> None:
    fused = fuse([_c("a", 2.0), _c("b", 1.0)], RankingOptions())
    assert [c.score for c in fused] == [1.0, 0.5]


def test_rrf_puts_first_on_both_sides_at_one() -> None:
    fused = {c.key: c.score for c in fuse([_c("a", 2.0, 0.9), _c("b", 1.0, 0.5)], RankingOptions(fusion="rrf"))}
    assert fused["a"] == pytest.approx(1.0)
    assert 0 < fused["b"] < fused["a"]


def test_dated_notes_lose_half_per_30_days_and_evergreen_ones_keep_their_score() -> None:
    today = date(2026, 11, 30)
    scored = [
        Candidate("fresh", 0, 0, date(2026, 11, 30), frozenset(), score=0.8),
        Candidate("month", 0, 0, date(2026, 10, 31), frozenset(), score=0.8),
        Candidate("two", 0, 0, date(2026, 10, 1), frozenset(), score=0.8),
        Candidate("pinned", 0, 0, None, frozenset(), score=0.8),
        Candidate("future", 0, 0, date(2027, 1, 1), frozenset(), score=0.8),
    ]
    after = {c.key: c.score for c in decay(scored, today, 30.0)}
    assert after == pytest.approx({"fresh": 0.8, "month": 0.4, "two": 0.2, "pinned": 0.8, "future": 0.8})


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("MEMORY.md", None),
        ("memory/bank/2026-01-01-project.md", None),
        ("memory/daily/2026-11-30.md", date(2026, 11, 30)),
        ("memory/snapshots/2026-11-30-0930.md", date(2026, 11, 30)),
        ("memory/summaries/2026-11-23.md", date(2026, 11, 23)),
        ("memory/notes.md", None),
        ("memory/daily/2026-13-45.md", None),
    ],
)
def test_which_notes_are_dated(path: str, expected: date | None) -> None:
    assert dated_note(path) == expected


def test_mmr_skips_a_near_duplicate_for_something_different() -> None:
    base = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    twin = np.array([0.999, 0.0447, 0.0], dtype=np.float32)
    other = np.array([0.0, 0.0, 1.0], dtype=np.float32)
    pool = [
        Candidate("a", 0, 0, None, frozenset(), score=0.90),
        Candidate("a-twin", 0, 0, None, frozenset(), score=0.89),
        Candidate("b", 0, 0, None, frozenset(), score=0.70),
    ]
    vectors = {"a": base, "a-twin": twin / np.linalg.norm(twin), "b": other}
    assert [c.key for c in mmr(pool, vectors, 2, 0.7)] == ["a", "b"]
    assert [c.key for c in mmr(pool, vectors, 2, 1.0)] == ["a", "a-twin"]  # λ = 1: relevance only


def test_mmr_falls_back_to_term_overlap_without_vectors() -> None:
    pool = [
        Candidate("x", 0, None, None, frozenset({"red", "car", "fast"}), score=0.9),
        Candidate("y", 0, None, None, frozenset({"red", "car", "fast"}), score=0.85),
        Candidate("z", 0, None, None, frozenset({"blue", "boat"}), score=0.7),
    ]
    assert [c.key for c in mmr(pool, {}, 2, 0.5)] == ["x", "z"]


@pytest.mark.parametrize(
    ("key", "chat_type", "channel", "expected"),
    [
        ("agent:main:main", "direct", "telegram", True),
        ("agent:main:telegram:direct:123", "direct", "telegram", True),
        ("agent:main:telegram:group:42", "group", "telegram", False),
        ("agent:main:slack:channel:C1", "channel", "slack", False),
        ("cron:nightly", "direct", "cron", False),
        ("agent:main:main", "direct", "heartbeat", False),
        ("agent:main:subagent:7f3a", "direct", "api", False),
        ("agent:main:dashboard:incognito-1234", "direct", "api", False),
        ("hook:github", "direct", "api", False),
    ],
)
def test_which_sessions_are_remembered(key: str, chat_type: str, channel: str, expected: bool) -> None:
    assert is_remembered_session(key, chat_type, channel) is expected


def test_remembering_defaults_to_on_only_for_the_shared_main_session() -> None:
    assert remembers(AgentConfig()) is True
    assert remembers(AgentConfig(dm_scope="per-channel-peer")) is False
    assert remembers(AgentConfig(dm_scope="per-peer", remember_across_conversations=True)) is True
    assert remembers(AgentConfig(remember_across_conversations=False)) is False


def test_bm25_weighs_a_rare_word_above_a_common_one_and_saturates_repeats() -> None:
    documents = [["melanie", "pottery"], ["melanie", "kids"], ["melanie", "camping"], ["melanie"] * 5]
    scores = bm25([("melanie", 1.0), ("pottery", 1.0)], documents)
    assert int(np.argmax(scores)) == 0  # the rare word decides
    assert scores[3] < 2 * scores[1]  # five repeats of a common word are not five times one
    assert bm25([("absent", 1.0)], documents).tolist() == [0.0] * 4
    assert bm25([], documents).tolist() == [0.0] * 4


def _t(key: str, words: str = "", cosine: float = 0.0, context: float = 0.5) -> Turn:
    return Turn(key, words.split(), cosine, context)


def test_a_message_is_ranked_by_its_conversation_its_words_and_its_meaning() -> None:
    turns = [_t("words", "pottery class", 0.2), _t("meaning", "clay", 0.4), _t("neither", "kids", 0.1)]
    scores = rank_turns(turns, [("pottery", 1.0)], adjacent=[])
    assert scores["words"] > scores["meaning"] > scores["neither"]
    # a better conversation lifts all of its messages
    lifted = rank_turns([*turns[:2], _t("neither", "kids", 0.1, context=1.0)], [("pottery", 1.0)], adjacent=[])
    assert lifted["neither"] > lifted["meaning"]
    assert all(0 <= s <= 1 for s in [*scores.values(), *lifted.values()])
    best = rank_turns([_t("all", "pottery", 1.0, 1.0)], [("pottery", 1.0)], adjacent=[("all", "all")])
    assert best["all"] == pytest.approx(1.0)


def test_a_message_saying_what_is_asked_in_other_words_outranks_a_weak_one_in_a_better_conversation() -> None:
    # no shared words: "where did she hike" asked, "we walked the ridge trail" said (meaning 0.9) in a middling
    # chunk, beside small talk (meaning 0.2) in a chunk that fused a little better; each in a sitting of its own
    query = [("hike", 1.0)]
    paraphrase = _t("paraphrase", "walked ridge trail", 0.9, context=0.5)
    turns = [paraphrase, _t("small talk", "nice weather", 0.2, context=0.7)]
    scores = rank_turns(turns, query, adjacent=[])
    assert scores["paraphrase"] > scores["small talk"]
    # with the earlier share of meaning (0.2) the better chunk won
    earlier = rank_turns(turns, query, adjacent=[], weights=TurnWeights(meaning=0.2))
    assert earlier["paraphrase"] < earlier["small talk"]
    assert all(0 <= s <= 1 for s in [*scores.values(), *earlier.values()])


def test_the_answer_beside_a_matching_question_gains_from_its_neighbour() -> None:
    turns = [_t("question", "what pottery did you make", 0.5), _t("answer", "a bowl", 0.2), _t("other", "a cup", 0.2)]
    scores = rank_turns(turns, [("pottery", 1.0)], adjacent=[("question", "answer"), ("other", "unknown")])
    assert scores["question"] > scores["answer"] > scores["other"]
    alone = rank_turns(turns, [("pottery", 1.0)], adjacent=[], weights=TurnWeights(neighbour=0.0))
    assert alone["answer"] == pytest.approx(alone["other"])


def test_a_short_answer_takes_its_meaning_from_the_lines_around_it() -> None:
    # "what did the kids like at the museum?" asked; "they loved the dinosaurs" (own cosine 0.2) answers the
    # question before it (0.7), in the same chunk as a stray line elsewhere of the same own cosine and words
    turns = [
        _t("question", "how did the kids like it", 0.7, context=0.4),
        _t("answer", "they loved the dinosaurs", 0.2, context=0.4),
        _t("stray", "they loved the weather", 0.2, context=0.4),
        _t("chat", "see you soon", 0.1, context=0.4),
    ]
    adjacent = [("question", "answer"), ("answer", "question"), ("stray", "chat")]  # a repeat counts once
    plain = TurnWeights(neighbour=0.0, conversation=0.0)
    scores = rank_turns(turns, [("kid", 1.0)], adjacent, plain)
    assert scores["answer"] > scores["stray"]
    alone = rank_turns(turns, [("kid", 1.0)], adjacent, replace(plain, meaning_in_context=False))
    assert alone["answer"] == pytest.approx(alone["stray"])
    # the window's cosine is the mean of the line's and its neighbours'
    lone = rank_turns([_t("only", "", 0.5, context=0.0)], [], [], replace(plain, words=0.0, context=0.0))
    pair = rank_turns(turns[:2], [], [("question", "answer")], replace(plain, words=0.0, context=0.0))
    assert lone["only"] == pytest.approx(0.5)
    assert pair["answer"] == pytest.approx(pair["question"]) == pytest.approx((0.7 + 0.2) / 2)
    assert all(0 <= v <= 1 for v in [*scores.values(), *alone.values()])


def test_a_sitting_where_several_lines_speak_of_the_question_lifts_them_above_a_lucky_line() -> None:
    def said(key: str, words: str, sitting: str) -> Turn:
        return Turn(key, words.split(), 0.3, 0.5, conversation=sitting)

    query = [("kids", 1.0), ("museum", 1.0)]
    turns = [
        said("lucky", "kids museum", "monday"),  # one line with both words, nothing around it
        said("filler", "weather", "monday"),
        said("first", "kids museum", "friday"),  # the same line, in a sitting that keeps talking about it
        said("again", "kids loved the museum", "friday"),
        said("more", "museum bones", "friday"),
    ]
    scores = rank_turns(turns, query, adjacent=[])
    assert scores["first"] > scores["lucky"]
    assert scores["again"] > scores["filler"]
    assert all(0 <= s <= 1 for s in scores.values())
    without = rank_turns(turns, query, adjacent=[], weights=TurnWeights(conversation=0.0))
    assert without["first"] == pytest.approx(without["lucky"])


def test_the_sittings_words_do_not_outweigh_a_line_that_means_what_is_asked() -> None:
    """Since a turn's vector reads it after the line before it, its meaning is steadier, and its sitting's words
    weigh less (0.15 -> 0.1): a line meaning what is asked (cosine 0.8) outranks one with the asked word and
    little meaning (0.15) in a sitting that has the word, where it lost before."""
    meant = Turn("meant", [], 0.8, 0.5, conversation="monday")
    worded = Turn("worded", ["museum"], 0.15, 0.5, conversation="friday")
    scores = rank_turns([meant, worded], [("museum", 1.0)], adjacent=[])
    assert scores["meant"] > scores["worded"]
    before = rank_turns([meant, worded], [("museum", 1.0)], adjacent=[], weights=TurnWeights(conversation=0.15))
    assert before["meant"] < before["worded"]


def test_the_bench_ranks_messages_across_hits_by_their_own_scores() -> None:
    hits = [
        {"score": 0.9, "message_ids": ["a1", "a2"], "message_scores": [0.8, 0.3]},
        {"score": 0.7, "message_ids": ["b1", "a2"], "message_scores": [0.6, 0.35]},
        {"score": 0.5, "message_ids": ["c1", "c2"]},  # an older stack: the hit's score, in its order
    ]
    assert rank_messages(hits, {"b1": "doc-b1"}) == ["a1", "doc-b1", "c1", "c2", "a2"]


def test_the_bench_in_all_mode_keeps_memorys_order_and_adds_what_session_search_found_beyond_it() -> None:
    assert memory_then_sessions(["m1", "s2", "m3"], ["s1", "s2", "s3"]) == ["m1", "s2", "m3", "s1", "s3"]
    long = [f"m{i}" for i in range(TOP)]
    assert memory_then_sessions(long, ["s1"]) == long


@pytest.mark.parametrize(
    "query",
    ["When did Caroline go to the support groups?", "ERR_CONN_RESET on deploy", "他不吃辣椒吗", "happy studies"],
)
def test_a_lines_query_words_are_found_as_full_tokenizing_finds_them(query: str) -> None:
    lines = [
        "User (Caroline): I went to an LGBTQ support group yesterday and it was so powerful.",
        "User (Melanie): Happy for you! My studies are going well, Caroline's grandma says hi.",
        "Assistant: The deploy failed with ERR_CONN_RESET again",
        "User (小王): 我不吃辣椒，他也不吃",
        "User: nothing of the sort",
    ]
    asked = build_query(query)
    assert asked is not None
    words = _LineWords(asked.lexemes)
    for line in lines:
        found, length = words.of([line])
        assert sorted(found) == sorted(t for t in index_terms(line) if t in set(asked.lexemes)), line
        assert length >= len(line.split(": ", 1)[-1].split())


def test_a_speakers_name_counts_in_their_own_lines_not_where_others_speak_to_them() -> None:
    """A question naming Caroline asks for her lines; Melanie's "Wow, Caroline, …" only speaks to her. A name
    nobody among the lines speaks under (Jon) still counts where a line says it."""
    lines = [
        "User (Caroline): I went to a support group on Sunday.",
        "User (Melanie): Wow, Caroline, your group sounds awesome!",
        "User (Melanie): Jon and Caroline met at the support group.",
    ]
    asked = build_query("What did Caroline and Jon do at the support group?")
    assert asked is not None
    caroline, jon = index_terms("Caroline"), index_terms("Jon")
    words = _LineWords(asked.lexemes, lines)
    own, spoken_to, about = (words.of([line])[0] for line in lines)
    assert set(caroline) <= set(own)
    assert not set(caroline) & set(spoken_to)
    assert set(jon) <= set(about)
    assert not set(caroline) & set(about)
    assert set(caroline) <= set(_LineWords(asked.lexemes).of([lines[1]])[0])  # without the speakers: any mention
