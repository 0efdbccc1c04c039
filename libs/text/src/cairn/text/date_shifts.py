"""Calendar arithmetic behind relative dates, pure: days, weeks (Monday first, as in ISO 8601 and as Chinese,
Japanese and Korean speakers count them), weekends, months and years relative to an anchor day."""

import calendar
from datetime import date, timedelta

Span = tuple[date, date]  # first and last day, both included


def one_day(day: date) -> Span:
    return (day, day)


def days_from(anchor: date, days: int) -> Span:
    return one_day(anchor + timedelta(days=days))


def week_of(anchor: date, weeks: int = 0) -> Span:
    monday = anchor - timedelta(days=anchor.weekday()) + timedelta(weeks=weeks)
    return (monday, monday + timedelta(days=6))


def weekday_of_week(anchor: date, weeks: int, weekday: int) -> Span:
    """`weekday` (0 = Monday) of the week `weeks` after the anchor's: "下周二" said on a Sunday is two days on."""
    return one_day(week_of(anchor, weeks)[0] + timedelta(days=weekday))


def coming(anchor: date, weekday: int) -> Span:
    """The next such weekday, today included: "Tuesday's meeting" said on a Tuesday is today's."""
    return one_day(anchor + timedelta(days=(weekday - anchor.weekday()) % 7))


def previous(anchor: date, weekday: int) -> Span:
    """The latest such weekday before today: "last Friday" said on a Saturday is yesterday."""
    return one_day(anchor - timedelta(days=(anchor.weekday() - weekday - 1) % 7 + 1))


def after_next(anchor: date, weekday: int) -> Span:
    """ "Friday after next": a week after the coming one, today excluded."""
    return one_day(coming(anchor + timedelta(days=1), weekday)[0] + timedelta(days=7))


def weekend_of(anchor: date, weeks: int = 0) -> Span:
    saturday = week_of(anchor, weeks)[0] + timedelta(days=5)
    return (saturday, saturday + timedelta(days=1))


def month_shift(anchor: date, months: int) -> tuple[int, int]:
    index = anchor.year * 12 + anchor.month - 1 + months
    return divmod(index, 12)[0], divmod(index, 12)[1] + 1


def month_of(anchor: date, months: int = 0) -> Span:
    year, month = month_shift(anchor, months)
    return (date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1]))


def year_of(anchor: date, years: int = 0) -> Span:
    return (date(anchor.year + years, 1, 1), date(anchor.year + years, 12, 31))


def months_from(anchor: date, months: int) -> Span:
    """The same day `months` later, clipped to the month's end (January 31 + 1 month = February 28/29)."""
    year, month = month_shift(anchor, months)
    return one_day(date(year, month, min(anchor.day, calendar.monthrange(year, month)[1])))


def day_of_month(anchor: date, months: int, day: int) -> Span | None:
    """Day `day` of the month `months` after the anchor's; None when that month has no such day."""
    year, month = month_shift(anchor, months)
    return _valid(year, month, day)


def upcoming_day_of_month(anchor: date, day: int) -> Span | None:
    """A bare "3号": this month's if it is still to come (today included), else next month's."""
    this = _valid(anchor.year, anchor.month, day)
    if this is not None and this[0] >= anchor:
        return this
    return day_of_month(anchor, 1, day)


def dated(anchor: date, year: int | None, month: int, day: int) -> Span | None:
    """A calendar date; without a year, its occurrence nearest to the anchor (March 3 said in December is next
    year's only when that is nearer than this year's)."""
    if year is not None:
        return _valid(year, month, day)
    found = [s for y in (anchor.year - 1, anchor.year, anchor.year + 1) if (s := _valid(y, month, day)) is not None]
    return min(found, key=lambda span: (abs((span[0] - anchor).days), span[0] < anchor), default=None)


def named_month(anchor: date, month: int, years: int | None) -> Span:
    """A month by name: in a given year offset, else this year's when still to come (or current), else next
    year's."""
    if years is None:
        years = 0 if month >= anchor.month else 1
    year = anchor.year + years
    return (date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1]))


def _valid(year: int, month: int, day: int) -> Span | None:
    if not (1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]):
        return None
    return one_day(date(year, month, day))
