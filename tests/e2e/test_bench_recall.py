"""`cairn bench recall` end to end with tiny sizes, so the benchmark cannot rot: every part runs against the real
services and reports what the issue asks for. Lane-1 recalls are answered by lane 1 alone; lane 2's calls to the
hanging model end in `timeout` or `circuit_open`, and cairn closes every model call it started; a dataset's
questions are answered from their gold sessions by lane 2's extractive stand-in."""

import json
from pathlib import Path
from typing import Any

import pytest

from cairn.cli.bench_recall import run_recall_bench
from cairn.cli.bench_recall_calibrate import THRESHOLDS
from cairn.cli.bench_recall_calls import RecallBench
from cairn.local import LocalStack

pytestmark = pytest.mark.e2e

TURNS = [
    ("tiny/S1", "1:56 pm on 8 May, 2023", "Ana", "I adopted a greyhound and named him Biscuit"),
    ("tiny/S1", "1:57 pm on 8 May, 2023", "Ben", "Biscuit is a lovely name for a greyhound"),
    ("tiny/S2", "10:02 am on 20 May, 2023", "Ana", "My sister moved to Lisbon for her new job"),
    ("tiny/S2", "10:03 am on 20 May, 2023", "Ben", "Lisbon is a beautiful city"),
]
QUESTIONS = [
    ("What did Ana name the greyhound she adopted?", "tiny/S1"),
    ("Which city did Ana's sister move to for her job?", "tiny/S2"),
]


def _dataset(folder: Path) -> Path:
    folder.mkdir()
    corpus = [{"doc_id": f"tiny/D{i}", "conv_id": "tiny", "session_id": session, "turn_idx": i, "speaker": speaker,
               "timestamp": at, "text": text} for i, (session, at, speaker, text) in enumerate(TURNS)]  # fmt: skip
    questions = [{"question_id": f"tiny/q{i}", "conv_id": "tiny", "question": q, "category": 1,
                  "category_name": "single-hop", "gold_doc_ids": [], "gold_session_ids": [gold]}
                 for i, (q, gold) in enumerate(QUESTIONS)]  # fmt: skip
    for name, rows in (("corpus.jsonl", corpus), ("questions.jsonl", questions)):
        (folder / name).write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def _outcomes(row: dict[str, Any]) -> set[str]:
    return {part.rsplit(" ", 1)[0] for part in str(row["outcomes"]).split(", ") if part}


def test_every_part_of_the_recall_bench_runs_and_reports(services: LocalStack, tmp_path: Path) -> None:
    endpoints = services.endpoints()
    bench = RecallBench(sizes=(40,), queries=4, concurrency=4, load_queries=40, lane2_callers=3,
                        lane2_timeout_ms=500, data=(_dataset(tmp_path / "tiny"),))  # fmt: skip
    result = run_recall_bench(endpoints, bench)

    lane1 = result["lane1"]
    assert [row["agent"] for row in lane1] == ["baseline: 20 entries", "40 entries"]
    for row in lane1:
        assert row["queries"] == 4
        assert _outcomes(row) <= {"injected", "none"}, "lane 2 is off for these agents: lane 1 answers alone"

    alone, loaded, lane2 = result["load"]
    for row in (alone, loaded):
        assert _outcomes(row) <= {"injected", "none"}, row
    assert lane2["model_calls"] >= 1, "lane 2 reached the hanging model"
    assert _outcomes(lane2) <= {"timeout", "circuit_open"}, "a hanging model never yields an answer"
    assert lane2["still_held_after"] == 0, "cairn closed every model call it cancelled"
    assert lane2["model_calls_closed_by_cairn"] == lane2["model_calls"]
    assert "in model call" in lane2["timeouts_fell"] or "circuit_open" in lane2["outcomes"], lane2

    always, escalate = result["datasets"]
    assert (always["mode"], always["asked"], escalate["asked"]) == ("always", 2, 2)
    assert always["injected"] == always["injected_gold"] == 2, always
    assert always["injected_wrong"] == 0
    assert always["lane2_written_by"] == "extractive 2", "no model: the extractive stand-in wrote lane 2's block"

    calibrated = result["calibrate"]
    assert [row["threshold"] for row in calibrated] == list(THRESHOLDS)
    lowest = calibrated[0]
    assert (lowest["asked"], lowest["right"], lowest["wrong"]) == (2, 2, 0), (
        "each question's top entry is its gold turn"
    )
    assert [row["injected"] for row in calibrated] == sorted((row["injected"] for row in calibrated), reverse=True)
    assert result["suggested_min_score"]["fitted_on"] == "tiny"
