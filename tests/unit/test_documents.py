"""The memory-document layout every service and the CLI share: which paths are documents (and the words
used to refuse the others), text limits, and how a document splits into numbered lines."""

from datetime import date

import pytest

from cairn.events.documents import (
    LAYOUT,
    MAX_DOCUMENT_BYTES,
    MAX_PATH_CHARS,
    daily_path,
    document_lines,
    path_problem,
    text_character_problem,
    text_size_problem,
)


@pytest.mark.parametrize(
    "path",
    [
        "MEMORY.md",
        "memory/bank/profile.md",
        "memory/bank/偏好.md",
        "memory/bank/project notes (2026).md",
        "memory/daily/2026-11-30.md",
        "memory/daily/2024-02-29.md",
        "memory/snapshots/2026-11-30-1405-2.md",
        "memory/summaries/2026-W48.md",
        "memory/bank/" + "a" * (MAX_PATH_CHARS - len("memory/bank/.md")) + ".md",
    ],
)
def test_documents_of_the_layout_are_accepted(path: str) -> None:
    assert path_problem(path) is None


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("", f"path is empty; use {LAYOUT}"),
        ("memory/bank/" + "a" * MAX_PATH_CHARS + ".md", f"path is {MAX_PATH_CHARS + 15} characters; the limit is 512"),
        ("/MEMORY.md", "path must be relative to the agent's memory (no leading '/')"),
        ("/etc/passwd", "path must be relative to the agent's memory (no leading '/')"),
        ("memory/../MEMORY.md", "path must not contain '.' or '..' segments"),
        ("memory/bank/../../secrets.md", "path must not contain '.' or '..' segments"),
        ("memory/./bank/a.md", "path must not contain '.' or '..' segments"),
        ("memory//bank/a.md", "path must not contain empty segments ('//') or end with '/'"),
        ("memory/bank/", "path must not contain empty segments ('//') or end with '/'"),
        ("memory\\bank\\a.md", "path separators are '/', never '\\'"),
        ("memory/bank/a\n.md", "path must not contain control characters, line breaks or non-ASCII spaces"),
        ("memory/bank/a\x00.md", "path must not contain control characters, line breaks or non-ASCII spaces"),
        ("memory/bank/cafe\u0301.md", "path must be in Unicode normalization form NFC"),
        ("memory/bank/a.txt", "Markdown only: the file name must end in .md"),
        ("MEMORY.markdown", "Markdown only: the file name must end in .md"),
        ("memory/bank/a.MD", "Markdown only: the file name must end in .md"),
        ("memory.md", f"path must be one of {LAYOUT}"),
        ("notes/a.md", f"path must be one of {LAYOUT}"),
        ("memory/a.md", f"path must be one of {LAYOUT}"),
        ("memory/bank/deeper/a.md", f"path must be one of {LAYOUT}"),
        ("memory/bank/.md", "the file name must not start with '.'"),
        ("memory/bank/.hidden.md", "the file name must not start with '.'"),
        ("memory/bank/what?.md", 'the file name must not contain any of < > : " | ? *'),
        ("memory/bank/a:b.md", 'the file name must not contain any of < > : " | ? *'),
        ("memory/daily/today.md", "a daily note is named memory/daily/YYYY-MM-DD.md, with a real date"),
        ("memory/daily/2026-02-30.md", "a daily note is named memory/daily/YYYY-MM-DD.md, with a real date"),
        ("memory/daily/20261130.md", "a daily note is named memory/daily/YYYY-MM-DD.md, with a real date"),
    ],
)
def test_other_paths_are_refused_with_a_reason(path: str, problem: str) -> None:
    assert path_problem(path) == problem


def test_daily_path_is_the_iso_date() -> None:
    assert daily_path(date(2026, 1, 5)) == "memory/daily/2026-01-05.md"
    assert path_problem(daily_path(date(2026, 1, 5))) is None


def test_text_size_is_counted_in_utf8_bytes() -> None:
    assert text_size_problem("x" * MAX_DOCUMENT_BYTES) is None
    assert text_size_problem("x" * (MAX_DOCUMENT_BYTES + 1)) == (
        f"text is {MAX_DOCUMENT_BYTES + 1} bytes in UTF-8; the limit is {MAX_DOCUMENT_BYTES} bytes"
    )
    chinese = "辣" * (MAX_DOCUMENT_BYTES // 3 + 1)  # three bytes each
    assert text_size_problem(chinese) == (
        f"text is {len(chinese) * 3} bytes in UTF-8; the limit is {MAX_DOCUMENT_BYTES} bytes"
    )


def test_markdown_may_hold_tabs_and_line_breaks_but_no_other_control_characters() -> None:
    assert text_character_problem("# Title\r\n\n- a\tb\n") is None
    allowed = "only tab, line feed and carriage return are allowed"
    assert (
        text_character_problem("ok\x1b[31m")
        == f"text must not contain a control character (U+001B) at character 3; {allowed}"
    )
    assert (
        text_character_problem("\x00")
        == f"text must not contain a control character (U+0000) at character 1; {allowed}"
    )
    assert text_character_problem("a\ud800") == (
        "text must not contain a lone surrogate (U+D800) at character 2; send text as valid UTF-8"
    )


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("", []),
        ("one", ["one"]),
        ("one\n", ["one\n"]),
        ("one\ntwo", ["one\n", "two"]),
        ("one\n\ntwo\n", ["one\n", "\n", "two\n"]),
        ("\n", ["\n"]),
        ("a\r\nb\r\n", ["a\r\n", "b\r\n"]),
        ("form\x0cfeed\u2028still one line", ["form\x0cfeed\u2028still one line"]),
    ],
)
def test_only_newlines_end_lines(text: str, lines: list[str]) -> None:
    assert document_lines(text) == lines
    assert "".join(document_lines(text)) == text
