"""Reading memory documents in windows (recall) and the write rules at the door (ingest), without I/O."""

from datetime import UTC, date, datetime

import pytest

from cairn.events.documents import MAX_DOCUMENT_BYTES
from cairn.ingest.memory import (
    Answer,
    Decided,
    Refusal,
    answer,
    idempotency_problem,
    today_in,
    version_of,
    write_refusal,
)
from cairn.recall.files import DEFAULT_LINES, MAX_WINDOW_CHARS, Window, window

NUMBERED = "".join(f"line {n}\n" for n in range(1, 301))  # 300 lines


# -- windows ---------------------------------------------------------------------------------------


def test_the_default_window_is_120_lines_and_says_where_to_go_on() -> None:
    shown = window(NUMBERED, 1, DEFAULT_LINES)
    assert shown.text == "".join(f"line {n}\n" for n in range(1, 121))
    assert (shown.lines, shown.total_lines, shown.next_from, shown.truncated) == (120, 300, 121, False)
    assert shown.notice == "Lines 1-120 of 300; continue with from=121."


def test_the_last_window_has_no_next() -> None:
    shown = window(NUMBERED, 241, DEFAULT_LINES)
    assert shown == Window("".join(f"line {n}\n" for n in range(241, 301)), 241, 60, 300, None, False, None)


def test_a_short_document_is_whole() -> None:
    assert window("# Me\n\nlikes tea", 1, 120) == Window("# Me\n\nlikes tea", 1, 3, 3, None, False, None)
    assert window("", 1, 120) == Window("", 1, 0, 0, None, False, None)


def test_past_the_end_is_empty_and_says_so() -> None:
    shown = window(NUMBERED, 301, 10)
    assert (shown.text, shown.lines, shown.next_from, shown.truncated) == ("", 0, None, False)
    assert shown.notice == "The document has 300 lines; from=301 is past its end."


def test_the_character_cap_keeps_whole_lines_and_names_the_next_line() -> None:
    wide = "".join(f"{n:04d}" + "x" * 995 + "\n" for n in range(1, 31))  # 30 lines of 1,000 characters
    shown = window(wide, 3, 120)
    assert shown.lines == 12
    assert len(shown.text) == 12_000
    assert shown.text.startswith("0003")
    assert shown.text.endswith("\n")
    assert (shown.next_from, shown.truncated, shown.total_lines) == (15, True, 30)
    assert shown.notice == "Cut at 12000 characters: lines 3-14 of 30 shown (asked for 28); continue with from=15."
    follow = window(wide, shown.next_from or 0, 120)
    assert follow.text.startswith("0015")


def test_a_line_longer_than_the_cap_is_cut_and_said_to_be() -> None:
    text = "short\n" + "y" * 20_000 + "\nafter\n"
    shown = window(text, 2, 120)
    assert shown.text == "y" * MAX_WINDOW_CHARS
    assert (shown.start, shown.lines, shown.next_from, shown.truncated) == (2, 1, 3, True)
    assert shown.notice == "Line 2 is 20001 characters; only its first 12000 are shown. Continue with from=3."
    assert window(text, 3, 120).text == "after\n"


def test_the_caps_count_characters_not_bytes() -> None:
    chinese = "辣" * 11_999 + "\n"  # 12,000 characters, 35,998 bytes
    assert window(chinese, 1, 120).truncated is False


# -- write rules at ingest -------------------------------------------------------------------------


def test_writes_are_refused_with_field_status_and_limit() -> None:
    assert write_refusal("MEMORY.md", "# ok\n") is None
    assert write_refusal("memory/../x.md", "") == Refusal(422, "path", "path must not contain '.' or '..' segments")
    assert write_refusal("MEMORY.md", "\x00") == Refusal(
        422,
        "text",
        "text must not contain a control character (U+0000) at character 1; only tab, line feed and carriage "
        "return are allowed",
    )
    assert write_refusal("MEMORY.md", "x" * (MAX_DOCUMENT_BYTES + 1)) == Refusal(
        413, "text", f"text is {MAX_DOCUMENT_BYTES + 1} bytes in UTF-8; the limit is {MAX_DOCUMENT_BYTES} bytes"
    )


@pytest.mark.parametrize(
    ("header", "version"), [(None, None), ("3", 3), ('"3"', 3), ('W/"12"', 12), ("0", 0), ("2147483647", 2**31 - 1)]
)
def test_if_match_reads_versions_as_etags(header: str | None, version: int | None) -> None:
    assert version_of(header) == version


@pytest.mark.parametrize("header", ["*", "abc", '"-1"', "", '"2147483648"', "9" * 30])
def test_if_match_refuses_what_is_not_a_version(header: str) -> None:
    with pytest.raises(ValueError, match="If-Match must be a version"):
        version_of(header)


def test_idempotency_keys_are_short_and_printable() -> None:
    assert idempotency_problem("retry-1") is None
    assert idempotency_problem("") == idempotency_problem("x" * 201) == idempotency_problem("a\nb") is not None


def test_today_is_the_agents_day() -> None:
    late = datetime(2026, 11, 30, 20, 30, tzinfo=UTC)
    assert today_in("UTC", late) == date(2026, 11, 30)
    assert today_in("Asia/Shanghai", late) == date(2026, 12, 1)
    assert today_in("America/Los_Angeles", datetime(2026, 12, 1, 3, 0, tzinfo=UTC)) == date(2026, 11, 30)


@pytest.mark.parametrize(
    ("decided", "expected"),
    [
        (Decided("applied", 1, "created", ""), Answer(201, "created")),
        (Decided("applied", 4, "updated", ""), Answer(200, "updated")),
        (Decided("applied", 5, "deleted", ""), Answer(200, "deleted")),
        (Decided("unchanged", 4, None, "text unchanged"), Answer(200, "unchanged")),
        (
            Decided("conflict", 4, None, ""),
            Answer(409, None, "If-Match is 2 but MEMORY.md is at version 4: read it again and apply your change "
                   "to that version.", "If-Match"),
        ),
        (
            Decided("conflict", 0, None, ""),
            Answer(409, None, "If-Match is 2 but MEMORY.md does not exist (version 0): read it again and apply "
                   "your change to that version.", "If-Match"),
        ),
        (Decided("missing", 0, None, ""), Answer(404, None, "There is no memory file 'MEMORY.md'.")),
        (
            Decided("too_large", 3, None, "the document would be 300000 bytes"),
            Answer(413, None, "The document is too large: the document would be 300000 bytes.", "text"),
        ),
    ],
)  # fmt: skip
def test_each_outcome_has_its_answer(decided: Decided, expected: Answer) -> None:
    assert answer("MEMORY.md", 2, decided) == expected
