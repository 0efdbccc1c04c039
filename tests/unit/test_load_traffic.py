"""The generated traffic of `cairn bench load`: reproducible, skewed like real tenants, bilingual."""

import asyncio
import random
import re
import time

from cairn.cli.bench_load import as_user, growth_until, percentiles
from cairn.cli.chatgen import Traffic, chat_text, zipf_weights

CJK = re.compile(r"[\u4e00-\u9fff]")
LATIN = re.compile(r"[A-Za-z]{3,}")


def test_the_same_seed_gives_the_same_traffic_and_another_seed_does_not() -> None:
    first, second, other = Traffic(50, seed=3), Traffic(50, seed=3), Traffic(50, seed=4)
    take = [next(first.requests(5)) for _ in range(20)]
    assert take == [next(second.requests(5)) for _ in range(20)]
    assert take != [next(other.requests(5)) for _ in range(20)]


def test_tenant_sizes_follow_zipf() -> None:
    weights = zipf_weights(1000, 1.0)
    assert abs(sum(weights) - 1) < 1e-9
    assert weights == sorted(weights, reverse=True)
    assert weights[0] / weights[9] == 10.0
    traffic = Traffic(1000, seed=1)
    picks = [traffic.pick_tenant() for _ in range(50_000)]
    largest = picks.count(0) / len(picks)
    assert abs(largest - weights[0]) < 0.01, "the largest tenant gets its share (~13%)"
    assert len(set(picks)) > 900, "and the long tail still talks"


def test_messages_are_chat_in_english_chinese_and_both_with_unique_ids() -> None:
    rng = random.Random(5)
    texts = [chat_text(rng) for _ in range(400)]
    assert any(CJK.search(t) and not LATIN.search(t) for t in texts), "some only Chinese"
    assert any(LATIN.search(t) and not CJK.search(t) for t in texts), "some only English"
    assert any(LATIN.search(t) and CJK.search(t) for t in texts), "some mixed"
    assert len(set(texts)) > 350, "varied, not a handful of sentences"
    traffic = Traffic(10, seed=2)
    ids = [m["message_id"] for chat in (next(traffic.requests(4)) for _ in range(100)) for m in chat.messages]
    assert len(set(ids)) == len(ids)


def test_helpers_of_the_report() -> None:
    assert (
        as_user("postgresql://cairn_app@127.0.0.1:5432/cairn", "postgres")
        == "postgresql://postgres@127.0.0.1:5432/cairn"
    )
    assert percentiles([float(n) for n in range(1, 101)]) == (50.5, 99.0)
    assert percentiles([42.0]) == (42.0, 42.0)  # one lag probe: `--lag-seconds 1` on a busy machine


async def test_the_lag_window_counts_what_was_accepted_inside_it() -> None:
    """The rate the lag load reached: what was posted before the window closed, not the queue drained after it."""
    posted = [5]  # before the window opened: not counted
    stop = time.perf_counter() + 0.05

    async def post() -> None:
        posted[0] += 7
        await asyncio.sleep(max(0.0, stop - time.perf_counter()) + 0.2)
        posted[0] += 100  # answered after the window: not counted

    grown, _ = await asyncio.gather(growth_until(lambda: posted[0], stop), post())
    assert grown == 7
    assert posted[0] == 112
