"""The calibrate part's bookkeeping: which turns are a question's evidence, what goes into an agent's bank, how the
top candidate is read back, and how a threshold is chosen from the table."""

import random

from cairn.cli.bench_recall_calibrate import (
    BANK,
    DISTRACTORS,
    Asked,
    banks,
    entry_line,
    evidence,
    suggested,
    table,
    top_of,
)


def _turn(doc: str, conv: str, session: str, text: str = "hello", speaker: str = "Ana") -> dict[str, object]:
    return {"doc_id": doc, "conv_id": conv, "session_id": session, "speaker": speaker, "timestamp": "8 May, 2023",
            "text": text}  # fmt: skip


CORPUS = [_turn("a/1", "a", "a/S1"), _turn("a/2", "a", "a/S1"), _turn("a/3", "a", "a/S2")]
CORPUS += [_turn(f"b/{i}", "b", "b/S1") for i in range(DISTRACTORS + 50)]
QUESTIONS = [
    {"question_id": "a/q0", "conv_id": "a", "question": "?", "gold_doc_ids": ["a/3"], "gold_session_ids": ["a/S2"]},
    {"question_id": "a/q1", "conv_id": "a", "question": "?", "gold_doc_ids": [], "gold_session_ids": ["a/S1"]},
]


def test_evidence_is_the_cited_turns_else_the_gold_sessions_turns() -> None:
    assert evidence(QUESTIONS, CORPUS) == {"a/q0": {"a/3"}, "a/q1": {"a/1", "a/2"}}


def test_a_bank_holds_its_questions_evidence_among_other_conversations_turns() -> None:
    built = banks(CORPUS, evidence(QUESTIONS, CORPUS), QUESTIONS, random.Random(1))
    assert set(built) == {"a"}, "only conversations with questions get a bank"
    entries = built["a"]
    assert {"a/1", "a/2", "a/3"} <= set(entries)
    others = [doc for doc in entries if not doc.startswith("a/")]
    assert len(others) == DISTRACTORS
    assert len(set(others)) == DISTRACTORS


def test_an_entry_is_one_line_with_its_day_and_speaker_once() -> None:
    assert entry_line(_turn("x", "a", "s", "I adopted\na greyhound")) == "- [8 May, 2023] Ana: I adopted a greyhound"
    assert entry_line(_turn("x", "a", "s", "Ana: hi\nAI: hello")) == "- [8 May, 2023] Ana: hi AI: hello"


def test_the_top_candidate_is_the_best_scored_lane1_line_of_the_bank() -> None:
    candidates = [{"lane": 1, "path": BANK, "lines": [2, 2], "score": 0.7},
                  {"lane": 1, "path": BANK, "lines": [3, 3], "score": 0.9},
                  {"lane": 1, "path": "MEMORY.md", "lines": [1, 1], "score": 0.99},
                  {"lane": 2, "path": BANK, "lines": [1, 1], "score": 1.0}]  # fmt: skip
    assert top_of(candidates, ["d1", "d2", "d3"]) == (0.9, "d3")
    assert top_of([], ["d1"]) == (None, None)


def test_the_table_counts_right_and_wrong_injections_and_the_rule_picks_the_lowest_fitting_threshold() -> None:
    asked = [Asked("fit", 0.9, True)] * 12 + [Asked("fit", 0.5, False)] * 12 + [Asked("fit", None, False)]
    asked += [Asked("held", 0.9, True), Asked("held", 0.8, False)]
    rows = table(asked)
    at = {(r["dataset"], r["threshold"]): r for r in rows}
    assert (at["fit", 0.3]["injected"], at["fit", 0.3]["right"], at["fit", 0.3]["wrong"]) == (24, 12, 12)
    assert at["fit", 0.55]["wrong_rate"] == 0.0
    assert at["fit", 0.55]["recall"] == round(12 / 25, 3)
    assert at["fit", 0.95]["injected"] == 0
    assert at["fit", 0.95]["precision"] is None
    chosen = suggested(rows)
    assert chosen["min_score"] == 0.55
    assert chosen["held_out"]["held"]["wrong"] == 1
