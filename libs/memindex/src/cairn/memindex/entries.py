"""Cutting a memory document into its entries, so that search scores a fact on its own rather than diluted among
the ~400 tokens of its neighbours: a daily note of four unrelated facts is four search units, and lane 1's
`min_score` means the same for a short `MEMORY.md` as for a long one.

An entry is a Markdown list item at any depth (with its continuation lines, a loose item's indented paragraphs
after a blank line included), a paragraph, or a fenced code block. Headings and label items (an item that ends
with a colon and has items nested under it: "- Pets:") name what follows rather than say something: they are no
entry of their own but the `context` of every entry under them, as are the parent items of a nested item. The
context is searched with the entry (its words and its vector) but is not part of its lines, so every span is a
run of whole lines and citations keep their line numbers. A heading with nothing under it is an entry, and an
entry over the window is cut by `chunk_lines` as any long text is, each window with the entry's context.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from cairn.memindex.chunking import Span, chunk_lines, estimate_tokens

# Markers as CommonMark reads them: up to three spaces before a heading or a fence; list items at any indent.
_HEADING = re.compile(r" {0,3}(#{1,6})(\s|$)")
_ITEM = re.compile(r"(\s*)([-*+]|\d{1,9}[.)])(\s+|$)")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_LABEL_END = (":", "：")


@dataclass(frozen=True)
class Entry:
    """Lines `first..last` of one entry, and the lines that name it (headings, parent items), outermost first."""

    first: int
    last: int
    context: tuple[str, ...] = ()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


class _Outline:
    """The headings and open list items above the line being read: what names an entry there."""

    def __init__(self) -> None:
        self.headings: list[tuple[int, str]] = []  # (level, line)
        self.items: list[tuple[int, str]] = []  # (indent of the marker, the item's first line)

    def heading(self, line: str, level: int) -> None:
        self.headings = [h for h in self.headings if h[0] < level] + [(level, line.strip())]
        self.items = []

    def item(self, indent: int) -> tuple[str, ...]:
        """The context of an item at `indent` (items at that indent or deeper are closed)."""
        self.items = [i for i in self.items if i[0] < indent]
        return self.context()

    def context(self) -> tuple[str, ...]:
        return tuple(line for _, line in self.headings) + tuple(line.strip() for _, line in self.items)


def entries(lines: Sequence[str]) -> list[Entry]:
    """The entries of `lines`, in order, with their context; blank lines, headings and labels are in none."""
    found: list[Entry] = []
    outline = _Outline()
    heading_at: int | None = None  # a heading not yet followed by an entry
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        heading = _HEADING.match(line)
        if heading:
            level = len(heading[1])
            if heading_at is not None and level <= outline.headings[-1][0]:
                found.append(Entry(heading_at, heading_at, outline.context()[:-1]))  # nothing under it
            # a subsection's heading takes over a pending one, which names what the subsection holds
            outline.heading(line, level)
            heading_at, i = i, i + 1
            continue
        item = _ITEM.match(line)
        context = outline.item(_indent(line)) if item else outline.item(0)
        last = _entry_end(lines, i, item)
        heading_at = None
        if item and _is_label(lines, i, last):
            outline.items.append((_indent(line), "\n".join(lines[i : last + 1])))
        else:
            if item:
                outline.items.append((_indent(line), line))
            found.append(Entry(i, last, context))
        i = last + 1
    if heading_at is not None:
        found.append(Entry(heading_at, heading_at, outline.context()[:-1]))
    return found


def _is_label(lines: Sequence[str], first: int, last: int) -> bool:
    """An item that ends with a colon and has an item nested under it ("- Pets:" above "  - a cat, Miso")."""
    if not lines[last].rstrip().endswith(_LABEL_END):
        return False
    following = next((line for line in lines[last + 1 :] if line.strip()), None)
    return following is not None and bool(_ITEM.match(following)) and _indent(following) > _indent(lines[first])


def _entry_end(lines: Sequence[str], start: int, item: re.Match[str] | None) -> int:
    """The last line of the entry that starts at `start` (not a heading, not blank)."""
    fence = _FENCE.match(lines[start])
    if fence:
        closing = fence[1][0] * len(fence[1])
        end = start + 1
        while end < len(lines) and not lines[end].lstrip().startswith(closing):
            end += 1
        return min(end, len(lines) - 1)
    end = start
    while True:
        while end + 1 < len(lines) and not _breaks(lines[end + 1]):
            end += 1
        if item is None:
            return end
        loose = _loose_continuation(lines, end + 1, item.end())
        if loose is None:
            return end
        end = loose


def _breaks(line: str) -> bool:
    return not line.strip() or bool(_HEADING.match(line) or _ITEM.match(line) or _FENCE.match(line))


def _loose_continuation(lines: Sequence[str], at: int, content: int) -> int | None:
    """Where a loose item's next paragraph starts: after blank lines, a line indented to the item's text (not an
    item nested in it, which is an entry of its own); None when the item ends before `at`."""
    if at >= len(lines) or lines[at].strip():
        return None
    nxt = at
    while nxt < len(lines) and not lines[nxt].strip():
        nxt += 1
    if nxt == len(lines) or _indent(lines[nxt]) < max(content, 1) or _ITEM.match(lines[nxt]):
        return None
    return nxt


def chunk_entries(lines: Sequence[str], max_tokens: int = 400, overlap: int = 80) -> list[Span]:
    """The chunks of a memory document: one per entry with its context, a long entry cut into overlapping
    windows of at most `max_tokens` (lines past the entry are never pulled in)."""
    spans: list[Span] = []
    for entry in entries(lines):
        context = "\n".join(entry.context)
        text = "\n".join(lines[entry.first : entry.last + 1])
        if estimate_tokens(text) <= max_tokens:
            spans.append(Span(entry.first, entry.last, text, context))
            continue
        windows = chunk_lines(lines[entry.first : entry.last + 1], max_tokens, overlap)
        spans.extend(
            replace(w, first=entry.first + w.first, last=entry.first + w.last, context=context) for w in windows
        )
    return spans
