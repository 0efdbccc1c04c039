"""`cairn bench consumer` against the real NATS: each way drains the published events (a drain ends only once
it has seen them all), and the figures come back as ratios to nats-py in the same run."""

import pytest

from cairn.cli.bench_consumer import WAYS, run_consumer_bench
from cairn.local import LocalStack

pytestmark = pytest.mark.integration


async def test_each_way_drains_the_stream_and_is_reported_against_nats_py(stack: LocalStack) -> None:
    figures = await run_consumer_bench(stack.nats_url, messages=300, rounds=1)

    assert [f.way for f in figures] == list(WAYS)
    assert all(f.msg_per_s > 0 and f.us_per_msg > 0 for f in figures)
    assert figures[0].ratio_to_nats_py == 1.0
