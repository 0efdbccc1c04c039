"""`cairn bench large-batch` on the real stack (with a small batch): the batch is found word for word, a sample
of it checked one by one, and the quiet writes posted meanwhile are found too."""

import math

import pytest

from cairn.cli.bench_large_batch import run_large_batch
from cairn.local import LocalStack

pytestmark = pytest.mark.e2e


def test_the_batch_and_the_writes_beside_it_become_searchable(services: LocalStack) -> None:
    endpoints = services.endpoints()

    result = run_large_batch(endpoints, messages=30, timeout_s=120)

    assert result.messages == 30
    assert math.isfinite(result.all_searchable_s)
    assert result.all_searchable_s >= result.accepted_s
    assert result.small_writes >= 1
    assert math.isfinite(result.small_write_searchable_max_s)
