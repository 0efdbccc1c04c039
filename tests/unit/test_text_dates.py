"""Relative and absolute dates resolved against when they were said (cairn.text.dates), in English, Chinese,
Japanese and Korean, traps included: words that look like dates and are none, a Chinese week that starts on
Monday ("下周二" said on a Sunday is two days on), a bare weekday read as the coming one."""

from datetime import date, datetime, timedelta, timezone

import pytest

from cairn.text.dates import first_date, resolve_dates

CST = timezone(timedelta(hours=8))
SUN = datetime(2026, 12, 6, 10, 0, tzinfo=CST)  # a Sunday; its week is Mon 11-30 .. Sun 12-06
WED = datetime(2026, 12, 9, 15, 0, tzinfo=CST)  # a Wednesday; its week is Mon 12-07 .. Sun 12-13

Expected = tuple[str, str, str] | None  # (matched words, first day, last day), or no date at all


def day(iso: str) -> tuple[str, str]:
    return (iso, iso)


ENGLISH: list[tuple[str, datetime, Expected]] = [
    ("see you tomorrow", SUN, ("tomorrow", *day("2026-12-07"))),
    ("next Tuesday", SUN, ("next Tuesday", *day("2026-12-08"))),
    ("next Tuesday works", WED, ("next Tuesday", *day("2026-12-15"))),
    ("in two weeks", SUN, ("in two weeks", *day("2026-12-20"))),
    ("in 10 days", SUN, ("in 10 days", *day("2026-12-16"))),
    ("last Friday", SUN, ("last Friday", *day("2026-12-04"))),
    ("since last Friday", WED, ("last Friday", *day("2026-12-04"))),
    ("this weekend", SUN, ("this weekend", "2026-12-05", "2026-12-06")),
    ("this weekend?", WED, ("this weekend", "2026-12-12", "2026-12-13")),
    ("next weekend", WED, ("next weekend", "2026-12-19", "2026-12-20")),
    ("Tuesday's meeting", WED, ("Tuesday's", *day("2026-12-15"))),
    ("on Wednesday", WED, ("Wednesday", *day("2026-12-09"))),
    ("Friday after next", WED, ("Friday after next", *day("2026-12-18"))),
    ("Tuesday next week", WED, ("Tuesday next week", *day("2026-12-15"))),
    ("the day after tomorrow", SUN, ("the day after tomorrow", *day("2026-12-08"))),
    ("yesterday", SUN, ("yesterday", *day("2026-12-05"))),
    ("tonight", SUN, ("tonight", *day("2026-12-06"))),
    ("3 days ago", SUN, ("3 days ago", *day("2026-12-03"))),
    ("a couple of weeks from now", SUN, ("a couple of weeks from now", *day("2026-12-20"))),
    ("next week", SUN, ("next week", "2026-12-07", "2026-12-13")),
    ("next month", SUN, ("next month", "2027-01-01", "2027-01-31")),
    ("last year", SUN, ("last year", "2025-01-01", "2025-12-31")),
    ("on March 3", SUN, ("March 3", *day("2027-03-03"))),
    ("the 3rd of March, 2025", SUN, ("the 3rd of March, 2025", *day("2025-03-03"))),
    ("Nov 20", SUN, ("Nov 20", *day("2026-11-20"))),
    ("due 2027-01-05", SUN, ("2027-01-05", *day("2027-01-05"))),
    ("in March", SUN, ("in March", "2027-03-01", "2027-03-31")),
    # traps
    ("I go swimming on Sundays", SUN, None),
    ("every Tuesday", SUN, None),
    ("he was her Man Friday", SUN, None),
    ("we will march 3 miles", SUN, None),
    ("I may come", SUN, None),
    ("Feb 30", SUN, None),
    ("the last week of May", SUN, None),
]

CHINESE: list[tuple[str, datetime, Expected]] = [
    ("下周二去上海", SUN, ("下周二", *day("2026-12-08"))),  # Monday-first weeks: not 12-15
    ("下周二", WED, ("下周二", *day("2026-12-15"))),
    ("下週二", SUN, ("下週二", *day("2026-12-08"))),
    ("明天", SUN, ("明天", *day("2026-12-07"))),
    ("后天", SUN, ("后天", *day("2026-12-08"))),
    ("大后天", SUN, ("大后天", *day("2026-12-09"))),
    ("昨天", SUN, ("昨天", *day("2026-12-05"))),
    ("前天", SUN, ("前天", *day("2026-12-04"))),
    ("上个月", SUN, ("上个月", "2026-11-01", "2026-11-30")),
    ("下个月3号", SUN, ("下个月3号", *day("2027-01-03"))),
    ("本月20号", SUN, ("本月20号", *day("2026-12-20"))),
    ("周五", SUN, ("周五", *day("2026-12-11"))),
    ("周五", WED, ("周五", *day("2026-12-11"))),
    ("周三", WED, ("周三", *day("2026-12-09"))),
    ("这周六", WED, ("这周六", *day("2026-12-12"))),
    ("上周五", WED, ("上周五", *day("2026-12-04"))),
    ("下礼拜三", SUN, ("下礼拜三", *day("2026-12-09"))),
    ("星期天", WED, ("星期天", *day("2026-12-13"))),
    ("下下周一", WED, ("下下周一", *day("2026-12-21"))),
    ("下周", SUN, ("下周", "2026-12-07", "2026-12-13")),
    ("上周", SUN, ("上周", "2026-11-23", "2026-11-29")),
    ("这周末", WED, ("这周末", "2026-12-12", "2026-12-13")),
    ("3月3日", SUN, ("3月3日", *day("2027-03-03"))),
    ("2027年1月5日", SUN, ("2027年1月5日", *day("2027-01-05"))),
    ("三天后", SUN, ("三天后", *day("2026-12-09"))),
    ("两周后", SUN, ("两周后", *day("2026-12-20"))),
    ("三个月后", SUN, ("三个月后", *day("2027-03-06"))),
    ("十五号", WED, ("十五号", *day("2026-12-15"))),
    ("5号", WED, ("5号", *day("2027-01-05"))),  # the 5th has passed this month
    ("明年", SUN, ("明年", "2027-01-01", "2027-12-31")),
    ("去年3月", SUN, ("去年3月", "2025-03-01", "2025-03-31")),
    # traps
    ("我每周五都去游泳", SUN, None),
    ("一周一次", SUN, None),
    ("坐3号线", SUN, None),
    ("两个星期", SUN, None),
    ("住了三天", SUN, None),
]

JAPANESE: list[tuple[str, datetime, Expected]] = [
    ("来週の火曜日", SUN, ("来週の火曜日", *day("2026-12-08"))),
    ("来週の火曜日", WED, ("来週の火曜日", *day("2026-12-15"))),
    ("来週火曜", WED, ("来週火曜", *day("2026-12-15"))),
    ("明日", SUN, ("明日", *day("2026-12-07"))),
    ("明後日", SUN, ("明後日", *day("2026-12-08"))),
    ("あさって", SUN, ("あさって", *day("2026-12-08"))),
    ("しあさって", SUN, ("しあさって", *day("2026-12-09"))),
    ("今日", SUN, ("今日", *day("2026-12-06"))),
    ("昨日", SUN, ("昨日", *day("2026-12-05"))),
    ("一昨日", SUN, ("一昨日", *day("2026-12-04"))),
    ("今週の土曜日", WED, ("今週の土曜日", *day("2026-12-12"))),
    ("先週の金曜日", WED, ("先週の金曜日", *day("2026-12-04"))),
    ("再来週の月曜日", WED, ("再来週の月曜日", *day("2026-12-21"))),
    ("来週", SUN, ("来週", "2026-12-07", "2026-12-13")),
    ("先週", SUN, ("先週", "2026-11-23", "2026-11-29")),
    ("今週末", WED, ("今週末", "2026-12-12", "2026-12-13")),
    ("来月", SUN, ("来月", "2027-01-01", "2027-01-31")),
    ("先月", SUN, ("先月", "2026-11-01", "2026-11-30")),
    ("来月3日", SUN, ("来月3日", *day("2027-01-03"))),
    ("3月3日", SUN, ("3月3日", *day("2027-03-03"))),
    ("2027年1月5日", SUN, ("2027年1月5日", *day("2027-01-05"))),
    ("１２月２４日", SUN, ("１２月２４日", *day("2026-12-24"))),  # full-width digits
    ("3日後", SUN, ("3日後", *day("2026-12-09"))),
    ("2週間後", SUN, ("2週間後", *day("2026-12-20"))),
    ("3か月後", SUN, ("3か月後", *day("2027-03-06"))),
    ("1ヶ月前", SUN, ("1ヶ月前", *day("2026-11-06"))),
    ("金曜日", WED, ("金曜日", *day("2026-12-11"))),
    ("水曜", WED, ("水曜", *day("2026-12-09"))),
    ("来年", SUN, ("来年", "2027-01-01", "2027-12-31")),
    ("15日に", WED, ("15日", *day("2026-12-15"))),
    # traps
    ("毎週火曜日", SUN, None),
    ("趣味は日曜大工です", SUN, None),
    ("3日間かかる", SUN, None),
    ("火曜日ごとに", SUN, None),
    ("きょうだいがいます", SUN, None),
]

KOREAN: list[tuple[str, datetime, Expected]] = [
    ("다음 주 화요일", SUN, ("다음 주 화요일", *day("2026-12-08"))),
    ("다음 주 화요일", WED, ("다음 주 화요일", *day("2026-12-15"))),
    ("다음주 화요일", WED, ("다음주 화요일", *day("2026-12-15"))),
    ("내일", SUN, ("내일", *day("2026-12-07"))),
    ("모레", SUN, ("모레", *day("2026-12-08"))),
    ("내일모레", SUN, ("내일모레", *day("2026-12-08"))),
    ("글피", SUN, ("글피", *day("2026-12-09"))),
    ("오늘", SUN, ("오늘", *day("2026-12-06"))),
    ("어제", SUN, ("어제", *day("2026-12-05"))),
    ("그저께", SUN, ("그저께", *day("2026-12-04"))),
    ("이번 주 토요일", WED, ("이번 주 토요일", *day("2026-12-12"))),
    ("지난주 금요일", WED, ("지난주 금요일", *day("2026-12-04"))),
    ("다음 주", SUN, ("다음 주", "2026-12-07", "2026-12-13")),
    ("지난주", SUN, ("지난주", "2026-11-23", "2026-11-29")),
    ("이번 주말", WED, ("이번 주말", "2026-12-12", "2026-12-13")),
    ("다음 주말", WED, ("다음 주말", "2026-12-19", "2026-12-20")),
    ("다음 달", SUN, ("다음 달", "2027-01-01", "2027-01-31")),
    ("지난달", SUN, ("지난달", "2026-11-01", "2026-11-30")),
    ("다음 달 3일", SUN, ("다음 달 3일", *day("2027-01-03"))),
    ("3월 3일", SUN, ("3월 3일", *day("2027-03-03"))),
    ("2027년 1월 5일", SUN, ("2027년 1월 5일", *day("2027-01-05"))),
    ("3일 후", SUN, ("3일 후", *day("2026-12-09"))),
    ("2주 뒤", SUN, ("2주 뒤", *day("2026-12-20"))),
    ("3개월 후", SUN, ("3개월 후", *day("2027-03-06"))),
    ("이틀 후", SUN, ("이틀 후", *day("2026-12-08"))),
    ("일주일 전", SUN, ("일주일 전", *day("2026-11-29"))),
    ("두 달 뒤", SUN, ("두 달 뒤", *day("2027-02-06"))),
    ("금요일", WED, ("금요일", *day("2026-12-11"))),
    ("수요일", WED, ("수요일", *day("2026-12-09"))),
    ("내년", SUN, ("내년", "2027-01-01", "2027-12-31")),
    ("15일에 만나요", WED, ("15일", *day("2026-12-15"))),
    # traps
    ("오늘날의 기술", SUN, None),
    ("매주 화요일", SUN, None),
    ("화요일마다", SUN, None),
    ("3일 동안", SUN, None),
    ("그제야 알았다", SUN, None),  # "only then"
]


def _first(text: str, anchor: datetime) -> Expected:
    found = first_date(text, anchor)
    return None if found is None else (found.words, found.first.isoformat(), found.last.isoformat())


@pytest.mark.parametrize(("text", "anchor", "expected"), ENGLISH, ids=[c[0] for c in ENGLISH])
def test_english(text: str, anchor: datetime, expected: Expected) -> None:
    assert _first(text, anchor) == expected


@pytest.mark.parametrize(("text", "anchor", "expected"), CHINESE, ids=[c[0] for c in CHINESE])
def test_chinese(text: str, anchor: datetime, expected: Expected) -> None:
    assert _first(text, anchor) == expected


@pytest.mark.parametrize(("text", "anchor", "expected"), JAPANESE, ids=[c[0] for c in JAPANESE])
def test_japanese(text: str, anchor: datetime, expected: Expected) -> None:
    assert _first(text, anchor) == expected


@pytest.mark.parametrize(("text", "anchor", "expected"), KOREAN, ids=[c[0] for c in KOREAN])
def test_korean(text: str, anchor: datetime, expected: Expected) -> None:
    assert _first(text, anchor) == expected


def test_at_least_25_cases_per_language() -> None:
    assert min(len(ENGLISH), len(CHINESE), len(JAPANESE), len(KOREAN)) >= 25


def test_today_is_the_anchors_own_day_in_its_time_zone() -> None:
    late = datetime(2026, 12, 6, 23, 30, tzinfo=timezone(timedelta(hours=-5)))  # already 12-07 in UTC
    found = first_date("tomorrow", late)
    assert found is not None
    assert found.first == date(2026, 12, 7)
    assert found.window(late) == (
        datetime(2026, 12, 7, tzinfo=late.tzinfo),
        datetime(2026, 12, 8, tzinfo=late.tzinfo),
    )


def test_every_date_of_a_mixed_message_in_order_with_its_span() -> None:
    text = "明天 call Tom, then 下周二 fly; 来週の火曜日 and 다음 주 화요일"
    found = resolve_dates(text, SUN)
    assert [text[r.start : r.end] for r in found] == ["明天", "下周二", "来週の火曜日", "다음 주 화요일"]
    assert [r.first for r in found] == [date(2026, 12, 7), date(2026, 12, 8), date(2026, 12, 8), date(2026, 12, 8)]


def test_a_span_resolves_to_its_first_and_last_day() -> None:
    found = first_date("this weekend", SUN)
    assert found is not None
    assert not found.is_day
    assert found.window(SUN)[1] - found.window(SUN)[0] == timedelta(days=2)
