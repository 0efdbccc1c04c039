"""Dates a message names, resolved against when it was said: "tomorrow", "next Tuesday", "下周二", "来週の火曜日",
"다음 주 화요일", "March 3", "3月3日", "2027-01-05" → a day or a span of days, with the words matched.

Table-driven (`date_rules`), for English, Chinese, Japanese and Korean at once (a message may mix them). Where
rules overlap the longest match wins, so "下周二" is one date rather than a week and a weekday. Conventions:
weeks start on Monday; "next <weekday>" is that day of next week, "last <weekday>" the latest one before today,
a bare weekday ("Tuesday's meeting", "周五") the coming one, today included; a date without a year is its
occurrence nearest to the anchor. Words that look like dates but are none ("every Tuesday", "日曜大工")
resolve to nothing."""

import re
import unicodedata
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from cairn.text.date_rules import BY_LANGUAGE, Rule

RULES: tuple[Rule, ...] = tuple(r for rules in BY_LANGUAGE.values() for r in rules)


@dataclass(frozen=True)
class ResolvedDate:
    start: int  # the matched words, text[start:end]
    end: int
    words: str
    first: date
    last: date  # == first for one day

    @property
    def is_day(self) -> bool:
        return self.first == self.last

    def window(self, anchor: datetime) -> tuple[datetime, datetime]:
        """From the first day's midnight to the midnight after the last day, in the anchor's time zone."""
        tz = anchor.tzinfo
        return (datetime.combine(self.first, time(), tz), datetime.combine(self.last + timedelta(days=1), time(), tz))


def _normalized(text: str) -> str:
    """Full-width digits and letters as ASCII (NFKC), one character for one so the spans stay the text's."""
    return "".join(c if len(n := unicodedata.normalize("NFKC", c)) != 1 else n for c in text)


def resolve_dates(text: str, anchor: datetime) -> list[ResolvedDate]:
    """Every date `text` names, in order, resolved against `anchor` (when the text was said, in the speaker's
    time zone: its date is "today")."""
    today, plain = anchor.date(), _normalized(text)
    found: list[tuple[int, int, int, Rule, re.Match[str]]] = []
    for order, rule in enumerate(RULES):
        found.extend((m.start(), m.end(), order, rule, m) for m in rule.pattern.finditer(plain) if m.end() > m.start())
    taken: list[tuple[int, int]] = []
    resolved: list[ResolvedDate] = []
    for start, end, _, rule, match in sorted(found, key=lambda f: (f[0] - f[1], f[0], f[2])):
        if any(start < e and s < end for s, e in taken):
            continue
        taken.append((start, end))
        span = rule.resolve(match, today) if rule.resolve is not None else None
        if span is not None:
            resolved.append(ResolvedDate(start, end, text[start:end], span[0], span[1]))
    return sorted(resolved, key=lambda r: r.start)


def first_date(text: str, anchor: datetime) -> ResolvedDate | None:
    found = resolve_dates(text, anchor)
    return found[0] if found else None
