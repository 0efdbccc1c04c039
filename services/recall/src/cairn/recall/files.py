"""Windows over a memory document's lines, for `GET /v1/memory/files/{path}`. No I/O.

A window is at most `lines` lines from line `from` (counted from 1, as in search citations) and at most
`max_chars` characters: whole lines only, unless a single line is longer than the cap, which is then cut.
The window says where the next one starts and, in words, what was left out.
"""

from dataclasses import dataclass

from cairn.events.documents import document_lines

DEFAULT_LINES = 120
MAX_LINES = 2000
MAX_WINDOW_CHARS = 12_000


@dataclass(frozen=True)
class Window:
    text: str
    start: int
    lines: int  # lines returned (a cut line counts as one)
    total_lines: int
    next_from: int | None  # the first line not returned, None once the document's end is in the window
    truncated: bool  # the character cap left out lines that were asked for, or cut the one returned
    notice: str | None


def _fitting(asked: list[str], max_chars: int) -> list[str]:
    kept: list[str] = []
    used = 0
    for line in asked:
        if used + len(line) > max_chars:
            break
        kept.append(line)
        used += len(line)
    return kept


def window(text: str, start: int, lines: int, max_chars: int = MAX_WINDOW_CHARS) -> Window:
    all_lines = document_lines(text)
    total = len(all_lines)
    asked = all_lines[start - 1 : start - 1 + lines]
    kept = _fitting(asked, max_chars)
    if asked and not kept:  # one line longer than the cap: show its beginning rather than nothing
        return _cut_line(asked[0], start, total, max_chars)
    end = start - 1 + len(kept)
    next_from = end + 1 if end < total else None
    truncated = len(kept) < len(asked)
    if truncated:
        notice = (
            f"Cut at {max_chars} characters: lines {start}-{end} of {total} shown "
            f"(asked for {len(asked)}); continue with from={next_from}."
        )
    elif next_from is not None:
        notice = f"Lines {start}-{end} of {total}; continue with from={next_from}."
    elif not kept and total:
        notice = f"The document has {total} lines; from={start} is past its end."
    else:
        notice = None
    return Window("".join(kept), start, len(kept), total, next_from, truncated, notice)


def _cut_line(line: str, start: int, total: int, max_chars: int) -> Window:
    next_from = start + 1 if start < total else None
    notice = f"Line {start} is {len(line)} characters; only its first {max_chars} are shown."
    if next_from is not None:
        notice += f" Continue with from={next_from}."
    return Window(line[:max_chars], start, 1, total, next_from, True, notice)
