"""`cairn bench retrieval --index-timeout`: a slow embedding model (`local-e5` indexes LoCoMo in tens of
minutes) must not have its run scored on a half-built index, so the wait for each conversation is set."""

import json
from pathlib import Path
from typing import Any

import pytest

from cairn.cli import bench_retrieval
from cairn.cli.bench_retrieval import Conversation, run_retrieval
from cairn.cli.main import _parser


def _dataset(folder: Path) -> Path:
    rows = [{"doc_id": f"c{c}:t{t}", "conv_id": f"c{c}", "text": "hi"} for c in (1, 2) for t in (0, 1)]
    questions = [{"question_id": "q1", "conv_id": "c1", "question": "hi?"}]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    return folder


def test_the_index_wait_defaults_to_ten_minutes_and_can_be_raised() -> None:
    common = ["bench", "retrieval", "--data", "d", "--out", "o.jsonl"]
    assert _parser().parse_args(common).index_timeout == 600.0
    assert _parser().parse_args([*common, "--index-timeout", "3600"]).index_timeout == 3600.0


@pytest.mark.parametrize("mode", ["sessions", "memory", "all"])
def test_every_conversation_is_waited_for_as_long_as_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    waits: list[tuple[str, str, float]] = []

    def ingest(endpoints: dict[str, str], conv_id: str, rows: list[dict[str, Any]]) -> Conversation:
        return Conversation(f"key-{conv_id}", "main", "1")

    def wait(kind: str) -> Any:
        return lambda url, conversation, timeout_s: waits.append((kind, conversation.api_key, timeout_s))

    monkeypatch.setattr(bench_retrieval, "_ingest", ingest)
    monkeypatch.setattr(bench_retrieval, "_wait_indexed", wait("sessions"))
    monkeypatch.setattr(bench_retrieval, "_wait_memory_indexed", wait("memory"))
    monkeypatch.setattr(bench_retrieval, "_resolver", lambda url, conversation: {})
    monkeypatch.setattr(bench_retrieval, "_rank", lambda *args: ["c1:t0"])
    endpoints = {"CAIRN_RECALL_URL": "http://127.0.0.1:9"}
    run_retrieval(endpoints, _dataset(tmp_path), tmp_path / "run.jsonl", mode, 3600)
    expected = [("sessions", "key-c1", 3600), ("sessions", "key-c2", 3600)]
    if mode != "sessions":
        expected += [("memory", "key-c1", 3600), ("memory", "key-c2", 3600)]
    assert waits == expected
