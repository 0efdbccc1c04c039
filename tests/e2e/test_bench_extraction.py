"""`cairn bench extraction` against the test stack (CAIRN_EXTRACTION_DEBOUNCE_S=2): the first turns of a LoCoMo
conversation, read in place, are all read by one model call per sitting (a sitting's turns arrive together and
are fewer than a batch holds), and the figures it reports are the status's."""

from pathlib import Path

import pytest

from cairn.cli.bench_extraction import conversation_rows, run_extraction
from cairn.local import LocalStack

pytestmark = pytest.mark.e2e
CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "datasets" / "locomo" / "corpus.jsonl"


@pytest.mark.skipif(not CORPUS.exists(), reason="the shared datasets are not next to the repository")
def test_the_bench_reads_every_turn_with_one_call_per_sitting(services: LocalStack) -> None:
    endpoints = {"CAIRN_INGEST_URL": services.url("ingest"), "CAIRN_RECALL_URL": services.url("recall"),
                 "CAIRN_ADMIN_TOKEN": services.state.admin_token}  # fmt: skip
    turns = 40
    sittings = len({row["session_id"] for row in conversation_rows(CORPUS, "conv-26", turns)})
    result = run_extraction(endpoints, CORPUS, "conv-26", limit=turns, timeout_s=120)
    assert (result.turns, result.sessions) == (turns, sittings)
    assert result.model_calls == sittings
    assert result.candidates == 2 * sittings
    assert result.bad_replies == 0
    assert result.calls_per_100_turns == round(sittings * 100 / turns, 2)
    assert result.prompt_tokens_per_100_turns > 0
