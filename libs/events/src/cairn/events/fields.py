"""The kinds of field a request or an event carries, each checked in one place, so that whatever is accepted
at the door can be stored and indexed by every consumer (issue 28).

- `Name`: ids, keys and names (a peer, a message id, a session key, a sender): one line, no control
  characters (C0, DEL, C1) and no lone surrogates.
- `FreeText`: what people write (messages, documents, queries): tab, line feed and carriage return are kept;
  NUL (which PostgreSQL text cannot hold), the other C0 controls, DEL, C1 and lone surrogates (which UTF-8
  cannot encode) are refused.
- `EventTime`: an RFC 3339 string with an offset (never an integer epoch), within years 1900–9999 once
  converted to UTC, short of the last microsecond of 9999 (asyncpg writes that instant, like 0001-01-01
  00:00 UTC, as PostgreSQL's `infinity`).
- `Integer`: a whole number, also written as a float (`1e30`), so that an upper bound answers with its
  limit rather than with pydantic's "exceeded maximum size"; `INT32_MAX` is a PostgreSQL `int`'s largest.
  Bounds of an optional one go before `whole` (see `Integer`), for the JSON schema to show them.

Each refusal is a pydantic error whose message names the character or the limit, so the API answers it as
a 422 problem naming the field.
"""

import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator
from pydantic_core import PydanticCustomError

INT32_MAX = 2**31 - 1
MIN_YEAR, MAX_YEAR = 1900, 9999
# asyncpg encodes exactly this instant as `infinity` (and 0001-01-01T00:00:00Z as `-infinity`).
INFINITY_INSTANT = datetime.max.replace(tzinfo=UTC)
TIME_RANGE = f"years {MIN_YEAR} to {MAX_YEAR} in UTC (at most 9999-12-31T23:59:59.999998Z)"

_NOT_IN_NAME = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_NOT_IN_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_BEYOND_MICROSECONDS = re.compile(r"(\.[0-9]{6})[0-9]+")
# RFC 3339 `date-time` (section 5.6; `T` may be lower case or, per its note, a space); fractions of any length.
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def _found(found: re.Match[str], control_hint: str) -> str:
    char, at = found.group(), found.start() + 1
    if "\ud800" <= char <= "\udfff":
        return f"must not contain a lone surrogate (U+{ord(char):04X}) at character {at}; send text as valid UTF-8"
    return f"must not contain a control character (U+{ord(char):04X}) at character {at}{control_hint}"


def name_problem(value: str) -> str | None:
    """Why `value` cannot be an id, key or name; None when it can."""
    found = _NOT_IN_NAME.search(value)
    return None if found is None else _found(found, "")


def text_problem(value: str) -> str | None:
    """Why `value` cannot be stored as free text; None when it can."""
    found = _NOT_IN_TEXT.search(value)
    return None if found is None else _found(found, "; only tab, line feed and carriage return are allowed")


def time_problem(value: datetime) -> str | None:
    """Why an instant cannot be stored and compared as event time; None when it can."""
    if value.tzinfo is None or value.utcoffset() is None:
        return "must carry a UTC offset (RFC 3339), such as 2026-11-29T09:30:00+08:00"
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        return f"must be within {TIME_RANGE}"
    if not MIN_YEAR <= utc.year <= MAX_YEAR or utc == INFINITY_INSTANT:
        return f"must be within {TIME_RANGE}"
    return None


def checked_name(value: str) -> str:
    # `isprintable` (C, no control, format or separator character but the space) settles nearly every value
    problem = None if value.isprintable() else name_problem(value)
    if problem is not None:
        raise PydanticCustomError("name_characters", problem)
    return value


def _checked_text(value: str) -> str:
    problem = None if value.isprintable() else text_problem(value)
    if problem is not None:
        raise PydanticCustomError("text_characters", problem)
    return value


def whole(value: Any) -> Any:
    """`1e30` as the integer it is, for the field's bounds to judge (pydantic cannot hold it as an int)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _event_time(value: Any) -> Any:
    """Strings must be RFC 3339 (numbers, epochs included, are refused; datetimes built in code are checked as
    they are), and the instant within the range. Events carry two times and are decoded in bulk: a year from
    1901 to 9998 is within the range whatever its offset, so only the first and last years are parsed here."""
    if isinstance(value, datetime):
        problem = time_problem(value)
    elif isinstance(value, str) and _RFC3339.fullmatch(value):
        if MIN_YEAR < int(value[:4]) < MAX_YEAR:
            return value
        parsed = _parsed(value)
        problem = None if parsed is None else time_problem(parsed)  # None: pydantic names what is wrong
    else:
        raise PydanticCustomError(
            "rfc3339_time", "must be an RFC 3339 time with a UTC offset, such as 2026-11-29T09:30:00+08:00"
        )
    if problem is not None:
        raise PydanticCustomError("time_range", problem)
    return value


def _parsed(value: str) -> datetime | None:
    """An RFC 3339 string as `datetime.fromisoformat` reads it (microseconds at most); None if not a date."""
    try:
        return datetime.fromisoformat(_BEYOND_MICROSECONDS.sub(r"\1", value.upper()))
    except ValueError:
        return None


Name = Annotated[str, AfterValidator(checked_name)]
FreeText = Annotated[str, AfterValidator(_checked_text)]
EventTime = Annotated[datetime, BeforeValidator(_event_time)]
Integer = Annotated[int, BeforeValidator(whole)]
# An optional `Integer` with bounds is written with its bounds first, `Annotated[int, Field(ge=…, le=…),
# BeforeValidator(whole)] | None`: put on the field, or after the validator, pydantic checks them alike but writes
# them into the JSON schema as `ge`/`le`, which JSON Schema does not know, so the OpenAPI document said nothing of
# them and clients (and generated requests) sent numbers that were refused. A `Name` with a pattern likewise is
# `Annotated[str, Field(pattern=…), AfterValidator(checked_name)]`, or the document loses the pattern.
