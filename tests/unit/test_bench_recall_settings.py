"""`cairn bench recall`'s flags become its settings: sizes, parts, and the dataset folders, which are looked for
only when the datasets part runs (a missing one stops the run before anything is sent)."""

from pathlib import Path

import pytest

from cairn.cli.bench_recall_calls import PARTS
from cairn.cli.main import _parser, recall_settings


def test_flags_become_the_settings(tmp_path: Path) -> None:
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "questions.jsonl").write_text("")
    args = _parser().parse_args(["bench", "recall", "--sizes", "500,2000", "--queries", "7", "--data", str(tmp_path),
                                 "--datasets", "tiny", "--questions", "3", "--lane2-timeout-ms", "900"])  # fmt: skip
    bench = recall_settings(args)
    assert bench.parts == PARTS
    assert (bench.sizes, bench.queries, bench.questions, bench.lane2_timeout_ms) == ((500, 2000), 7, 3, 900)
    assert bench.data == (tmp_path / "tiny",)


def test_datasets_are_looked_for_only_when_their_part_runs(tmp_path: Path) -> None:
    lane1 = recall_settings(_parser().parse_args(["bench", "recall", "--part", "lane1", "--data", str(tmp_path)]))
    assert (lane1.parts, lane1.data) == (("lane1",), ())
    with pytest.raises(SystemExit, match="no dataset at"):
        recall_settings(_parser().parse_args(["bench", "recall", "--part", "datasets", "--data", str(tmp_path)]))
