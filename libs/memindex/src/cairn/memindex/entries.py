"""Cutting a trusted document (`MEMORY.md`, bank files) into its entries, so that search scores a fact on its
own rather than diluted among the ~400 tokens of its neighbours, and lane 1's `min_score` means the same for a
short `MEMORY.md` as for a long one.

An entry is a Markdown list item at any depth (with its continuation lines), a paragraph, or a fenced code
block. A heading starts the entry after it (it joins that entry, which it names); blank lines belong to none.
An entry shorter than `SHORT_TOKENS` (a heading alone, "- Pets:") takes the next one in, up to `MERGE_TOKENS`
and never across a heading, so a fragment is not searched on its own; an entry over the window is cut by
`chunk_lines` as any document is. Every span is a run of whole lines, so citations keep their line numbers.
"""

import re
from collections.abc import Sequence

from cairn.memindex.chunking import Span, chunk_lines, estimate_tokens

SHORT_TOKENS = 6  # about 24 characters: "- Pets:", "## Diet"; a fact such as "- The user lives in Lisbon" is more
MERGE_TOKENS = 64
# Markers as CommonMark reads them: up to three spaces before a heading or a fence; list items at any indent.
_HEADING = re.compile(r" {0,3}#{1,6}(\s|$)")
_ITEM = re.compile(r"\s*([-*+]|\d{1,9}[.)])(\s|$)")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


def entry_blocks(lines: Sequence[str]) -> list[tuple[int, int, bool]]:
    """The entries of `lines` as (first, last, starts with a heading), in order; blank lines are in none."""
    blocks: list[tuple[int, int, bool]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        first, headed = i, bool(_HEADING.match(line))
        if headed:
            i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            if i == len(lines) or _HEADING.match(lines[i]):
                blocks.append((first, first, True))  # a heading with nothing under it before the next one
                continue
        i = _entry_end(lines, i) + 1
        blocks.append((first, i - 1, headed))
    return blocks


def _entry_end(lines: Sequence[str], start: int) -> int:
    """The last line of the entry that starts at `start` (not a heading, not blank)."""
    fence = _FENCE.match(lines[start])
    if fence:
        closing = fence[1][0] * len(fence[1])
        end = start + 1
        while end < len(lines) and not lines[end].lstrip().startswith(closing):
            end += 1
        return min(end, len(lines) - 1)
    end = start
    while end + 1 < len(lines):
        nxt = lines[end + 1]
        if not nxt.strip() or _HEADING.match(nxt) or _ITEM.match(nxt) or _FENCE.match(nxt):
            break
        end += 1
    return end


def chunk_entries(lines: Sequence[str], max_tokens: int = 400, overlap: int = 80) -> list[Span]:
    """The chunks of a trusted document: one per entry, a very short one merged with the next, a long one
    cut into overlapping windows of at most `max_tokens` (lines past the entry are never pulled in)."""
    tokens = [estimate_tokens(line) for line in lines]
    blocks = entry_blocks(lines)
    spans: list[Span] = []
    b = 0
    while b < len(blocks):
        first, last, _ = blocks[b]
        used = sum(tokens[first : last + 1])
        while used < SHORT_TOKENS and b + 1 < len(blocks) and not blocks[b + 1][2]:
            nxt_first, nxt_last, _ = blocks[b + 1]
            more = sum(tokens[nxt_first : nxt_last + 1])
            if used + more > MERGE_TOKENS:
                break
            b, last, used = b + 1, nxt_last, used + more
        b += 1
        if used <= max_tokens:
            spans.append(Span(first, last, "\n".join(lines[first : last + 1])))
            continue
        windows = chunk_lines(lines[first : last + 1], max_tokens, overlap)
        spans.extend(Span(first + w.first, first + w.last, w.text) for w in windows)
    return spans
