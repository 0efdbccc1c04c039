"""Days a memory query names ("on May 2nd", "5月2日", "2026-05-02"), pure. A question about what was said
on a day is answered by what is dated that day, whatever words it shares with the question: such
chunks join the candidates and get a bonus."""

import re
from datetime import date, datetime

_MONTHS = {
    name: number
    for number, names in enumerate(
        [("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",), ("jun", "june"),
         ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"), ("oct", "october"), ("nov", "november"),
         ("dec", "december")],
        start=1,
    )
    for name in names
}  # fmt: skip
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_ENGLISH_MONTH_DAY = re.compile(rf"\b({_MONTH})\.?\s+{_DAY}\b(?:,?\s+(\d{{4}}))?", re.IGNORECASE)
_ENGLISH_DAY_MONTH = re.compile(rf"\b{_DAY}\s+(?:of\s+)?({_MONTH})\b\.?(?:,?\s+(\d{{4}}))?", re.IGNORECASE)
_CJK = re.compile(r"(?:(\d{4})年)?(\d{1,2})月(\d{1,2})[日号號]")
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")

Day = tuple[int | None, int, int]  # (year or None, month, day)


def days_named(text: str) -> set[Day]:
    found: set[Day] = set()
    for m in _ENGLISH_MONTH_DAY.finditer(text):
        found.add((int(m[3]) if m[3] else None, _MONTHS[m[1].lower()], int(m[2])))
    for m in _ENGLISH_DAY_MONTH.finditer(text):
        found.add((int(m[3]) if m[3] else None, _MONTHS[m[2].lower()], int(m[1])))
    for m in _CJK.finditer(text):
        found.add((int(m[1]) if m[1] else None, int(m[2]), int(m[3])))
    for m in _ISO.finditer(text):
        found.add((int(m[1]), int(m[2]), int(m[3])))
    return {day for day in found if 1 <= day[1] <= 12 and 1 <= day[2] <= 31}


def month_days(days: set[Day]) -> list[str]:
    """`MM-DD` keys for SQL (`to_char(…, 'MM-DD')`); the year is checked by `on_day`."""
    return sorted({f"{month:02d}-{day:02d}" for _, month, day in days})


def on_day(when: date | datetime | None, days: set[Day]) -> bool:
    if when is None:
        return False
    return any((year is None or year == when.year) and month == when.month and day == when.day
               for year, month, day in days)  # fmt: skip
