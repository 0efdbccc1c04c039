"""`cairn bench memindex --part search --keep-seed FILE` through the real API: an agent seeded by an earlier run
on the same database is reused only when its size and text are the same and it still holds every chunk; anything
else is seeded afresh and remembered in the file."""

import json
from pathlib import Path

import pytest

from cairn.cli.bench_memindex import run_search
from cairn.local import LocalStack


@pytest.mark.e2e
def test_a_kept_seed_is_reused_only_for_the_same_size_and_text(services: LocalStack, tmp_path: Path) -> None:
    endpoints = services.endpoints()
    keep = tmp_path / "seeds.json"
    first = run_search(endpoints, chunks=40, queries=2, keep=keep)
    assert [row["seed"].split()[0] for row in first] == ["seeded", "seeded"]
    kept = json.loads(keep.read_text())
    assert len(kept) == 2, "one agent per size"

    again = run_search(endpoints, chunks=40, queries=2, keep=keep)
    assert [row["seed"].split()[0] for row in again] == ["reused", "reused"]
    assert json.loads(keep.read_text()) == kept, "nothing new was seeded"

    bigger = run_search(endpoints, chunks=41, queries=2, keep=keep)
    assert [row["seed"].split()[0] for row in bigger] == ["reused", "seeded"], "another size is another agent"
    assert len(json.loads(keep.read_text())) == 3

    without = run_search(endpoints, chunks=40, queries=2)
    assert [row["seed"].split()[0] for row in without] == ["seeded", "seeded"], "no file: always a fresh seed"
