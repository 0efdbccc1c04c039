"""Days named in memory queries, in English, Chinese and ISO form; and which dated chunks they select."""

from datetime import UTC, date, datetime

import pytest

from cairn.recall.memory_dates import days_named, month_days, on_day


@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("I mentioned on May 2nd that I went to the museum", {(None, 5, 2)}),
        ("On April 27th, how long did I run?", {(None, 4, 27)}),
        ("what happened on 8 May, 2023 and on the 3rd of June", {(2023, 5, 8), (None, 6, 3)}),
        ("我曾经在5月2日提到过我去了博物馆", {(None, 5, 2)}),
        ("在4月27号这天，我在公园里跑了多久？", {(None, 4, 27)}),
        ("2026年11月30日的会议", {(2026, 11, 30)}),
        ("see memory/daily/2026-11-30.md", {(2026, 11, 30)}),
        ("I may go there in 2 weeks", set()),
        ("13月45日", set()),
        ("nothing dated here", set()),
    ],
)
def test_days_named(text: str, days: set[tuple[int | None, int, int]]) -> None:
    assert days_named(text) == days


def test_a_named_day_selects_chunks_of_that_day_in_any_year_unless_the_year_is_named() -> None:
    may_2 = days_named("on May 2nd")
    assert month_days(may_2) == ["05-02"]
    assert on_day(datetime(2023, 5, 2, 18, 0, tzinfo=UTC), may_2)
    assert on_day(date(2026, 5, 2), may_2)
    assert not on_day(date(2026, 5, 3), may_2)
    assert not on_day(None, may_2)
    assert not on_day(date(2024, 5, 2), days_named("2 May 2023"))
