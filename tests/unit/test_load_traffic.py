"""The generated traffic of `cairn bench load`: reproducible, skewed like real tenants, bilingual."""

import itertools
import random
import re

import pytest

from cairn.cli.bench_lag import REQUEST_MESSAGES, Tally, merge, schedule, short_of_asked
from cairn.cli.bench_load import (
    DRAIN_CEILING,
    POLL_FLOOR,
    as_user,
    client_cpu,
    lag_rate_rows,
    lag_report,
    next_poll,
    percentiles,
    slowest,
    table,
)
from cairn.cli.chatgen import Traffic, chat_text, search_queries, zipf_weights
from cairn.cli.main import _parser, load_settings

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


def test_the_lag_window_counts_what_was_accepted_inside_it() -> None:
    """The rate the lag load reached: what was answered before the window closed, not the queue drained after it."""
    tally = Tally()
    tally.record(3, [10, 11, 12, 13, 14], answered=9.9, stop=10.0)
    tally.record(3, [20, 21, 22, 23, 24], answered=10.4, stop=10.0)  # answered after the window
    tally.record(0, [5], answered=1.0, stop=10.0)
    assert (tally.accepted_in_window, tally.accepted) == (6, 11)
    tally.leave(5, due=9.0, left=9.5, stop=10.0)
    tally.leave(5, due=9.8, left=10.1, stop=10.0)  # due inside, left after the window closed: not sent in it
    assert tally.sent == 5
    assert tally.behind_ms == pytest.approx([500.0, 300.0])
    assert tally.tenants == {3: (10, 24), 0: (1, 5)}


def test_the_workers_schedules_add_up_to_the_asked_rate_evenly_spaced() -> None:
    rate, workers, start, stop = 600.0, 3, 100.0, 130.0
    sends = sorted(t for w in range(workers) for t in schedule(rate, workers, w, start, stop))
    assert len(sends) * REQUEST_MESSAGES == rate * (stop - start)
    assert all(start <= t < stop for t in sends)
    gaps = {round(b - a, 9) for a, b in itertools.pairwise(sends)}
    assert gaps == {round(REQUEST_MESSAGES / rate, 9)}, "together they send one request every interval"
    assert list(schedule(rate, 1, 0, start, stop)) == pytest.approx(sends), "as one worker would"
    smaller = sorted(t for w in range(workers) for t in schedule(rate, workers, w, start, stop, batch=5))
    assert len(smaller) * 5 == rate * (stop - start), "the same rate in requests of 5"


def test_merged_tallies_add_counts_and_keep_each_tenants_highest_position() -> None:
    first, second = Tally(sent=10, behind_ms=[1.0], cpu_s=0.5), Tally(sent=5, behind_ms=[2.0], cpu_s=0.25)
    first.record(1, [7, 9], answered=0.0, stop=1.0)
    second.record(1, [8], answered=2.0, stop=1.0)
    second.record(2, [4], answered=0.0, stop=1.0)
    total = merge([first, second])
    assert (total.sent, total.accepted_in_window, total.accepted) == (15, 3, 4)
    assert total.tenants == {1: (3, 9), 2: (1, 4)}
    assert total.behind_ms == [1.0, 2.0]
    assert total.cpu_s == 0.75, "the sender processes' CPU adds up"


def test_the_bench_reports_its_own_cpu_per_message_and_share_of_a_core() -> None:
    assert client_cpu(1.5, 3000, 10.0) == {
        "client_cpu_s": 1.5, "client_cpu_ms_per_message": 0.5, "client_cpu_share_of_a_core": 0.15,
    }  # fmt: skip
    assert client_cpu(0.0, 0, 0.0)["client_cpu_ms_per_message"] == 0.0, "a phase that posted nothing"
    report = lag_report(570.0, 10.0, [40.0], Tally(sent=5700, accepted=5700, accepted_in_window=5500, cpu_s=2.0))
    assert (report["client_cpu_ms_per_message"], report["client_cpu_share_of_a_core"]) == (0.351, 0.2)


def test_the_lag_report_flags_an_accepted_rate_short_of_the_asked_one() -> None:
    met, short = Tally(sent=5700, accepted_in_window=5500), Tally(sent=5700, accepted_in_window=3038)
    reached = lag_report(570.0, 10.0, [40.0, 60.0], met)
    assert (reached["accepted_in_window_msg_per_s"], reached["short_of_asked"]) == (550.0, False)
    missed = lag_report(568.2, 10.0, [40.0], short)
    assert missed["rate_msg_per_s"] == missed["asked_msg_per_s"] == 568.2
    assert (missed["accepted_in_window_msg_per_s"], missed["short_of_asked"]) == (303.8, True)
    assert lag_rate_rows(reached)[1][2] == ""
    assert lag_rate_rows(missed)[1][2].startswith("SHORT: 53% of asked")
    old = {k: v for k, v in missed.items() if k != "short_of_asked"}  # a result written before the flag existed
    assert lag_rate_rows(old)[1][2].startswith("SHORT")
    assert short_of_asked(100.0, 90.0) is False
    assert short_of_asked(100.0, 89.9) is True


def test_skip_search_runs_only_throughput_and_lag() -> None:
    args = _parser().parse_args(["bench", "load", "--skip-search", "--lag-workers", "3", "--messages", "500"])
    settings = load_settings(args)
    assert (settings.search_at, settings.lag_workers, settings.messages) == ((), 3, 500)
    assert settings.lag_batch == REQUEST_MESSAGES
    assert load_settings(_parser().parse_args(["bench", "load", "--lag-batch", "5"])).lag_batch == 5
    assert load_settings(_parser().parse_args(["bench", "load"])).search_at == (100_000, 1_000_000)
    assert load_settings(_parser().parse_args(["bench", "load", "--throughput-only"])).throughput_only
    assert load_settings(_parser().parse_args(["bench", "load"])).queries == 1000
    assert load_settings(_parser().parse_args(["bench", "load", "--queries", "50"])).queries == 50


def test_every_run_of_a_seed_times_the_same_searches_whatever_was_posted_before() -> None:
    """The timed queries come from their own RNG: how much traffic a run posted first (which depends on its
    throughput) does not change them, so two runs' p99 compare the same queries."""
    first = search_queries(1000, seed=7)
    busy = Traffic(50, seed=7)
    for _ in range(300):
        next(busy.requests(5))
    assert search_queries(1000, seed=7) == first
    assert search_queries(1000, seed=8) != first
    assert search_queries(200, seed=7) == first[:200], "a shorter run times the first of the same queries"
    assert len(set(first)) > 300, "varied"
    assert sum(" " in q for q in first) > 200, "some of them two words"
    assert any(CJK.search(q) for q in first), "Chinese"
    assert any(LATIN.search(q) for q in first), "and English"


def test_the_slowest_searches_are_listed_slowest_first() -> None:
    """Each tenant's result names the queries that make its tail, slowest first, ties in the order they ran."""
    queries = ["Bob", "张伟 上海", "Alice ERR_CONN_RESET", "Lisbon", "Bob"]
    times = [3.04, 41.26, 88.0, 41.26, 1.0]
    assert slowest(queries, times, 3) == [
        {"query": "Alice ERR_CONN_RESET", "ms": 88.0},
        {"query": "张伟 上海", "ms": 41.3},
        {"query": "Lisbon", "ms": 41.3},
    ]
    assert len(slowest(queries, times)) == 5


def test_a_throughput_only_run_prints_the_throughput_rows_alone() -> None:
    """`--throughput-only` stops before the lag and search phases: its table has no rows for them."""
    put = {"raw_msg_per_s": 5000.0, "accepted_msg_per_s": 1500.0, "end_to_end_msg_per_s": 1250.0, "ratio_to_raw": 0.25}
    rows = table({"throughput": put, "index_lag": {}, "search": {}})
    assert [value for _, value, _ in rows] == ["5,000.0", "1,500.0", "1,250.0", "25.0%"]


def test_the_end_of_a_run_is_polled_no_later_than_the_backlog_could_drain() -> None:
    """Waiting for a backlog, the bench looks again when it could have drained at the earliest (at a rate well above
    any pipeline here), so a large backlog costs few consumer listings and the end is still seen within the floor."""
    assert next_poll(0) == next_poll(1) == POLL_FLOOR
    assert next_poll(10_000) == pytest.approx(0.5)
    assert next_poll(10**9) == 1.0
    for busy in (1, 500, 2_000, 8_000, 15_000):
        assert next_poll(busy) <= max(POLL_FLOOR, busy / DRAIN_CEILING)
    rounds, backlog = 0, 10_000.0
    while backlog > 0:  # a backlog of 10k draining at 2k/s takes 5 s: ~100 rounds at a fixed 50 ms
        backlog, rounds = backlog - 2_000 * next_poll(int(backlog)), rounds + 1
    assert rounds < 40
