"""The tables of relative and absolute date expressions, one per language: a pattern and what it resolves to
against the anchor day. A rule without a resolver marks words that look like a date and are none ("every
Tuesday", "日曜大工", "3号线", "오늘날"): it claims its text so no shorter rule reads a date into it."""

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from cairn.text import date_shifts as shift
from cairn.text.date_numbers import (
    CJK_NUMBER,
    ENGLISH_NUMBER,
    KOREAN_COUNTS,
    KOREAN_DAYS,
    cjk_number,
    english_number,
)
from cairn.text.date_shifts import Span

Resolver = Callable[[re.Match[str], date], Span | None]


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    resolve: Resolver | None  # None: not a date, whatever it looks like


def rule(pattern: str, resolve: Resolver | None, flags: int = 0) -> Rule:
    return Rule(re.compile(pattern, flags), resolve)


def fixed(days: int) -> Resolver:
    return lambda m, today: shift.days_from(today, days)


def by_unit(unit: str, count: int, today: date) -> Span:
    if unit == "day":
        return shift.days_from(today, count)
    if unit == "week":
        return shift.days_from(today, 7 * count)
    return shift.months_from(today, count * (12 if unit == "year" else 1))


def cjk_day(text: str) -> int:
    return cjk_number(text) or 0


# -- English --------------------------------------------------------------------------------------------------
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WD = "(" + "|".join(_WEEKDAYS) + ")"
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")  # fmt: skip
_MONTH_OF = {m.lower(): i for i, m in enumerate(_MONTHS, start=1)} | {
    m[:3].lower(): i for i, m in enumerate(_MONTHS, start=1)
} | {"sept": 9}  # fmt: skip
# Month names are matched capitalised only: "may", "march" and "sat" are also words.
_MON = "(" + "|".join(sorted({*_MONTHS, *(m[:3] for m in _MONTHS), "Sept"}, key=len, reverse=True)) + r")\.?"
_ORD = r"(\d{1,2})(?:st|nd|rd|th)?"
_STEP = {"next": 1, "coming": 1, "following": 1, "last": -1, "past": -1, "previous": -1, "this": 0, "current": 0}
_UNIT = r"(day|week|month|year)s?"
_I = re.IGNORECASE


def _wd(name: str) -> int:
    return _WEEKDAYS.index(name.lower())


def _en_relative_weekday(m: re.Match[str], today: date) -> Span:
    step, weekday = m[1].lower(), _wd(m[2])
    if step in ("last", "past", "previous"):
        return shift.previous(today, weekday)
    if step == "coming":
        return shift.coming(today, weekday)
    return shift.weekday_of_week(today, _STEP[step], weekday)


def _en_period(m: re.Match[str], today: date) -> Span:
    step, unit = _STEP[m[1].lower()], m[2].lower()
    if unit == "week":
        return shift.week_of(today, step)
    return shift.month_of(today, step) if unit == "month" else shift.year_of(today, step)


def _en_named_month(m: re.Match[str], today: date) -> Span:
    years = {"next": 1, "last": -1, "this": 0}.get(m[1].lower())
    return shift.named_month(today, _MONTH_OF[m[2].lower()], years)


def _year(text: str | None) -> int | None:
    return int(text) if text else None


ENGLISH: tuple[Rule, ...] = (
    rule(r"\b(?:the\s+)?day\s+after\s+tomorrow\b", fixed(2), _I),
    rule(r"\b(?:the\s+)?day\s+before\s+yesterday\b", fixed(-2), _I),
    rule(r"\b(?:today|tonight|this\s+(?:morning|afternoon|evening))\b", fixed(0), _I),
    rule(r"\b(?:tomorrow|tmrw)\b", fixed(1), _I),
    rule(r"\byesterday\b", fixed(-1), _I),
    rule(r"\b(next|last|this|coming|past|previous|current)\s+(week|month|year)\b", _en_period, _I),
    rule(r"\bthe\s+week\s+after\s+next\b", lambda m, t: shift.week_of(t, 2), _I),
    rule(r"\b(this|next|last|the)\s+weekend\b", lambda m, t: shift.weekend_of(t, _STEP.get(m[1].lower(), 0)), _I),
    rule(rf"\bin\s+({ENGLISH_NUMBER})\s+{_UNIT}\b", lambda m, t: by_unit(m[2].lower(), english_number(m[1]), t), _I),
    rule(
        rf"\b({ENGLISH_NUMBER})\s+{_UNIT}\s+(?:from\s+(?:now|today)|later)\b",
        lambda m, t: by_unit(m[2].lower(), english_number(m[1]), t),
        _I,
    ),
    rule(rf"\b({ENGLISH_NUMBER})\s+{_UNIT}\s+ago\b", lambda m, t: by_unit(m[2].lower(), -english_number(m[1]), t), _I),
    rule(rf"\b(next|last|this|coming|past|previous)\s+{_WD}\b", _en_relative_weekday, _I),
    rule(rf"\b{_WD}\s+after\s+next\b", lambda m, t: shift.after_next(t, _wd(m[1])), _I),
    rule(
        rf"\b{_WD}\s+(next|last|this)\s+week\b",
        lambda m, t: shift.weekday_of_week(t, _STEP[m[2].lower()], _wd(m[1])),
        _I,
    ),
    rule(
        rf"\b(next|last|this)\s+week\s+(?:on\s+)?{_WD}\b",
        lambda m, t: shift.weekday_of_week(t, _STEP[m[1].lower()], _wd(m[2])),
        _I,
    ),
    rule(rf"\b{_WD}(?:'s)?\b", lambda m, t: shift.coming(t, _wd(m[1])), _I),
    # Not dates (or not one this table can tell): "the last week of May".
    rule(r"\b(?:the\s+)?(?:first|second|third|last)\s+(?:week|weekend)\s+of\b", None, _I),
    # Habits and names, not dates: "every Tuesday", "on Sundays", "Man Friday", "Ruby Tuesday".
    rule(rf"\b(?:every|each)\s+(?:other\s+)?{_WD}\b|\b{_WD}s\b|\b(?:man|girl)\s+friday\b|\bruby\s+tuesday\b", None, _I),
    rule(r"\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b", lambda m, t: shift.dated(t, int(m[1]), int(m[2]), int(m[3]))),
    rule(
        rf"\b{_MON}\s+{_ORD}\b(?:,?\s+(\d{{4}})\b)?",
        lambda m, t: shift.dated(t, _year(m[3]), _MONTH_OF[m[1].lower()], int(m[2])),
    ),
    rule(
        rf"\b(?:the\s+)?{_ORD}\s+(?:of\s+)?{_MON}(?:,?\s+(\d{{4}})\b)?",
        lambda m, t: shift.dated(t, _year(m[3]), _MONTH_OF[m[2].lower()], int(m[1])),
    ),
    rule(rf"\b(in|next|last|this)\s+{_MON}(?!\s*\d)", _en_named_month),
)

# -- Chinese and Japanese (shared characters: 明日, 今年, 3月3日, N日后) -----------------------------------
_CN_WD = "一二三四五六日天"
_WEEK = r"(?:周|週|星期|礼拜|禮拜)"
_CN_STEP = {"下下": 2, "下": 1, "下个": 1, "下個": 1, "上上": -2, "上": -1, "上个": -1, "上個": -1, "这": 0,
            "這": 0, "这个": 0, "這個": 0, "本": 0, "今": 0}  # fmt: skip
_CN_STEPS = "(" + "|".join(sorted(_CN_STEP, key=len, reverse=True)) + ")"
_YEARS = {"明年": 1, "来年": 1, "來年": 1, "今年": 0, "去年": -1, "昨年": -1, "后年": 2, "後年": 2, "再来年": 2,
          "前年": -2, "一昨年": -2}  # fmt: skip
_YEAR_WORDS = "(" + "|".join(sorted(_YEARS, key=len, reverse=True)) + ")"
_AGO = ("前", "以前", "之前")


def _cn_wd(char: str) -> int:
    return 6 if char in "日天" else _CN_WD.index(char)


def _cjk_shift(m: re.Match[str], today: date) -> Span | None:
    count = cjk_number(m[1])
    if count is None:
        return None
    unit = m[2]
    kind = "day" if unit in ("天", "日") else "year" if unit == "年" else "month" if "月" in unit else "week"
    return by_unit(kind, -count if m[3] in _AGO else count, today)


def _year_date(m: re.Match[str], today: date) -> Span | None:
    span = shift.year_of(today, _YEARS[m[1]])
    if m[2] is None:
        return span
    month = cjk_number(m[2]) or 0
    if m[3] is None:
        return shift.named_month(today, month, _YEARS[m[1]]) if 1 <= month <= 12 else None
    return shift.dated(today, span[0].year, month, cjk_day(m[3]))


_CJK_SHARED: tuple[Rule, ...] = (
    rule(rf"{_YEAR_WORDS}(?:({CJK_NUMBER})月(?:({CJK_NUMBER})[日号號])?)?", _year_date),
    rule(
        rf"(?:(\d{{4}})年)?({CJK_NUMBER})月({CJK_NUMBER})[日号號]",
        lambda m, t: shift.dated(t, _year(m[1]), cjk_day(m[2]), cjk_day(m[3])),
    ),
    rule(r"(\d{4})年(\d{1,2})月(?![\d日号號])", lambda m, t: shift.named_month(t, int(m[2]), int(m[1]) - t.year)),
    rule(
        rf"({CJK_NUMBER})(?:个|個)?(天|日|周|週|星期|礼拜|个星期|個星期|个月|個月|週間|か月|ヶ月|カ月|ヵ月|ケ月|年)"
        r"(以后|之后|以後|之後|后|後|以前|之前|前)",
        _cjk_shift,
    ),
    rule(rf"过({CJK_NUMBER})(天)()", _cjk_shift),
)

CHINESE: tuple[Rule, ...] = (
    *_CJK_SHARED,
    rule(r"大后天|大後天", fixed(3)),
    rule(r"后天|後天", fixed(2)),
    rule(r"明天|明儿|明兒", fixed(1)),
    rule(r"今天|今儿|今兒|今晚|今早", fixed(0)),
    rule(r"昨天|昨儿|昨兒|昨晚", fixed(-1)),
    rule(r"大前天", fixed(-3)),
    rule(r"前天", fixed(-2)),
    rule(rf"{_CN_STEPS}{_WEEK}([{_CN_WD}])", lambda m, t: shift.weekday_of_week(t, _CN_STEP[m[1]], _cn_wd(m[2]))),
    rule(rf"{_CN_STEPS}{_WEEK}(?![{_CN_WD}末])", lambda m, t: shift.week_of(t, _CN_STEP[m[1]])),
    rule(rf"{_CN_STEPS}?{_WEEK}末", lambda m, t: shift.weekend_of(t, _CN_STEP[m[1]] if m[1] else 0)),
    rule(rf"{_WEEK}([{_CN_WD}])", lambda m, t: shift.coming(t, _cn_wd(m[1]))),
    rule(
        rf"(下个|下個|下|上个|上個|上|这个|這個|本)月(?:({CJK_NUMBER})[号號日])?",
        lambda m, t: (
            shift.month_of(t, _CN_STEP[m[1]]) if m[2] is None else shift.day_of_month(t, _CN_STEP[m[1]], cjk_day(m[2]))
        ),
    ),
    rule(rf"({CJK_NUMBER})[号號]", lambda m, t: shift.upcoming_day_of_month(t, cjk_day(m[1]))),
    # Not dates: habits ("每周五"), counts of weeks ("一周一次", "两个星期"), numbered places ("3号线").
    rule(rf"每(?:个|個)?{_WEEK}[{_CN_WD}]?|(?:[一二两兩三四五六七八九十几幾半]|\d+)(?:个|個)?{_WEEK}[{_CN_WD}]?", None),
    rule(rf"{CJK_NUMBER}[号號](?:线|線|楼|樓|房|门|門|桌|车厢|車廂|床|口|机|機|位|球员|选手)", None),
)

_JA_WD = "月火水木金土日"
_JA_STEP = {"再来週": 2, "来週": 1, "今週": 0, "先週": -1, "先々週": -2, "再来月": 2, "来月": 1, "今月": 0,
            "先月": -1, "先々月": -2, "今度の": 0}  # fmt: skip
_JA_WEEKS = "(再来週|来週|今週|先週|先々週)"

JAPANESE: tuple[Rule, ...] = (
    *_CJK_SHARED,
    rule(r"明々後日|明明後日|しあさって", fixed(3)),
    rule(r"明後日|あさって", fixed(2)),
    rule(r"明日|あした", fixed(1)),
    rule(r"今日|今晩|今夜|今朝", fixed(0)),
    rule(r"昨日|きのう|昨夜|昨晩", fixed(-1)),
    rule(r"一昨日|おととい", fixed(-2)),
    rule(
        rf"{_JA_WEEKS}の?([{_JA_WD}])曜日?", lambda m, t: shift.weekday_of_week(t, _JA_STEP[m[1]], _JA_WD.index(m[2]))
    ),
    rule(rf"{_JA_WEEKS}(?!末)", lambda m, t: shift.week_of(t, _JA_STEP[m[1]])),
    rule(r"(今週|来週|先週|今度の)?週末", lambda m, t: shift.weekend_of(t, _JA_STEP[m[1]] if m[1] else 0)),
    rule(rf"([{_JA_WD}])曜日?", lambda m, t: shift.coming(t, _JA_WD.index(m[1]))),
    rule(
        r"(再来月|来月|今月|先月|先々月)(?:の?(\d{1,2})日)?",
        lambda m, t: (
            shift.month_of(t, _JA_STEP[m[1]]) if m[2] is None else shift.day_of_month(t, _JA_STEP[m[1]], int(m[2]))
        ),
    ),
    rule(r"(\d{1,2})日(?![間中目分])", lambda m, t: shift.upcoming_day_of_month(t, int(m[1]))),
    # Not dates: habits ("毎週火曜日", "火曜日ごと"), "日曜大工" (DIY), durations ("3日間").
    rule(rf"毎週([{_JA_WD}])曜日?|([{_JA_WD}])曜日?(?:ごと|毎)|日曜大工|\d+日(?:間|中|目|分)", None),
)

_KO_WD = "월화수목금토일"
_KO_STEP = {"다다음": 2, "다음": 1, "이번": 0, "지난": -1, "저번": -1, "지지난": -2}
_KO_STEPS = "(" + "|".join(sorted(_KO_STEP, key=len, reverse=True)) + ")"
_KO_AFTER = r"(후|뒤|이후|있다가|전|이전)"
_KO_YEARS = {"내년": 1, "올해": 0, "금년": 0, "작년": -1, "재작년": -2, "내후년": 2}


def _ko_sign(word: str) -> int:
    return -1 if word in ("전", "이전") else 1


def _ko_unit(unit: str) -> str:
    return {"일": "day", "주": "week", "주일": "week", "개월": "month", "달": "month", "년": "year"}[unit]


KOREAN: tuple[Rule, ...] = (
    rule(r"내일\s?모레|모레", fixed(2)),
    rule(r"글피", fixed(3)),
    rule(r"내일", fixed(1)),
    rule(r"오늘", fixed(0)),
    rule(r"어제|어저께", fixed(-1)),
    rule(r"그저께|그제", fixed(-2)),
    rule(
        rf"{_KO_STEPS}\s?주\s?(?:의\s?)?([{_KO_WD}])요일",
        lambda m, t: shift.weekday_of_week(t, _KO_STEP[m[1]], _KO_WD.index(m[2])),
    ),
    rule(rf"{_KO_STEPS}\s?주(?![말일])", lambda m, t: shift.week_of(t, _KO_STEP[m[1]])),
    rule(rf"(?:{_KO_STEPS}\s?)?주말", lambda m, t: shift.weekend_of(t, _KO_STEP[m[1]] if m[1] else 0)),
    rule(rf"([{_KO_WD}])요일", lambda m, t: shift.coming(t, _KO_WD.index(m[1]))),
    rule(
        rf"{_KO_STEPS}\s?달(?:\s?(\d{{1,2}})일)?",
        lambda m, t: (
            shift.month_of(t, _KO_STEP[m[1]]) if m[2] is None else shift.day_of_month(t, _KO_STEP[m[1]], int(m[2]))
        ),
    ),
    rule(
        "(" + "|".join(_KO_YEARS) + r")(?:\s?(\d{1,2})월(?:\s?(\d{1,2})일)?)?",
        lambda m, t: (
            shift.year_of(t, _KO_YEARS[m[1]])
            if m[2] is None
            else shift.named_month(t, int(m[2]), _KO_YEARS[m[1]])
            if m[3] is None
            else shift.dated(t, t.year + _KO_YEARS[m[1]], int(m[2]), int(m[3]))
        ),
    ),
    rule(r"(?:(\d{4})년\s?)?(\d{1,2})월\s?(\d{1,2})일", lambda m, t: shift.dated(t, _year(m[1]), int(m[2]), int(m[3]))),
    rule(r"(\d{4})-(\d{1,2})-(\d{1,2})", lambda m, t: shift.dated(t, int(m[1]), int(m[2]), int(m[3]))),
    rule(
        rf"(\d{{1,3}})\s?(일|주일|주|개월|달|년)\s?{_KO_AFTER}",
        lambda m, t: by_unit(_ko_unit(m[2]), _ko_sign(m[3]) * int(m[1]), t),
    ),
    rule(
        "(" + "|".join(KOREAN_DAYS) + rf")\s?{_KO_AFTER}",
        lambda m, t: shift.days_from(t, _ko_sign(m[2]) * KOREAN_DAYS[m[1]]),
    ),
    rule(rf"일주일\s?{_KO_AFTER}", lambda m, t: shift.days_from(t, _ko_sign(m[1]) * 7)),
    rule(
        "(" + "|".join(KOREAN_COUNTS) + rf")\s?(주|달)\s?{_KO_AFTER}",
        lambda m, t: by_unit(_ko_unit(m[2]), _ko_sign(m[3]) * KOREAN_COUNTS[m[1]], t),
    ),
    rule(r"(\d{1,2})일(?=에|까지|부터|날|\s|$|[,.!?])", lambda m, t: shift.upcoming_day_of_month(t, int(m[1]))),
    # Not dates: "오늘날" (nowadays), "그제야" (only then), habits ("매주 화요일", "화요일마다"),
    # durations ("3일 동안", "3일간").
    rule(rf"오늘날|그제야|그제서야|매주\s?([{_KO_WD}])요일|([{_KO_WD}])요일마다|\d+일\s?(?:동안|간)", None),
)

BY_LANGUAGE: dict[str, tuple[Rule, ...]] = {"en": ENGLISH, "zh": CHINESE, "ja": JAPANESE, "ko": KOREAN}
