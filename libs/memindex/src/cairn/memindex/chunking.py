"""Cutting text into overlapping chunks of about `max_tokens`, pure and deterministic.

A chunk is a run of whole lines (a line longer than a chunk is cut into pieces that share its line
number). Chunks are built greedily from the first line, and where a chunk starts depends only on where
the previous one started, so appending lines never moves an earlier chunk: a growing transcript is
re-chunked from its last chunk on, and the result equals chunking it whole.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass

_CJK = re.compile(r"[\u1100-\u11ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3\uf900-\ufaff]")
CHARS_PER_TOKEN = 4  # Latin-script text; a CJK character is a token of its own


def estimate_tokens(text: str) -> int:
    cjk = len(_CJK.findall(text))
    return cjk + (len(text) - cjk + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


@dataclass(frozen=True)
class Span:
    """Lines `first..last` (indexes into the input, inclusive) and the chunk's text; `context` names it without
    being among its lines (the headings and parent items above a document's entry, `entries`)."""

    first: int
    last: int
    text: str
    context: str = ""


def split_long(text: str, max_tokens: int) -> list[str]:
    """A line too long for one chunk, cut into pieces of at most `max_tokens` (estimated)."""
    pieces, start, used = [], 0, 0.0
    for index, char in enumerate(text):
        used += 1.0 if _CJK.match(char) else 1.0 / CHARS_PER_TOKEN
        if used > max_tokens:
            pieces.append(text[start:index])
            start, used = index, (1.0 if _CJK.match(char) else 1.0 / CHARS_PER_TOKEN)
    pieces.append(text[start:])
    return [piece for piece in pieces if piece.strip()]


def chunk_lines(
    lines: Sequence[str], max_tokens: int = 400, overlap: int = 80, breaks: frozenset[int] = frozenset()
) -> list[Span]:
    """Overlapping windows of whole lines. `breaks` holds line indexes that must start a new chunk (a
    transcript's reset or a long pause): no chunk spans one, and no overlap is carried across it."""
    tokens = [estimate_tokens(line) for line in lines]
    spans: list[Span] = []
    start = 0
    while start < len(lines):
        if tokens[start] > max_tokens:
            spans.extend(Span(start, start, piece) for piece in split_long(lines[start], max_tokens))
            start += 1
            continue
        end, used = start, tokens[start]
        while end + 1 < len(lines) and end + 1 not in breaks and used + tokens[end + 1] <= max_tokens:
            end += 1
            used += tokens[end]
        text = "\n".join(lines[start : end + 1])
        if text.strip():
            spans.append(Span(start, end, text))
        start = _next_start(tokens, start, end, (max_tokens, overlap), breaks)
    return spans


def _next_start(tokens: Sequence[int], start: int, end: int, window: tuple[int, int], breaks: frozenset[int]) -> int:
    """The first line of the next chunk: the tail of this one that fits in the overlap, if any, always
    past `start` (progress). Nothing is carried across a break or into a line cut in pieces."""
    max_tokens, overlap = window
    following = end + 1
    if following >= len(tokens) or following in breaks or tokens[following] > max_tokens:
        return following
    nxt, carried = following, 0
    while nxt - 1 > start and carried + tokens[nxt - 1] <= overlap:
        nxt -= 1
        carried += tokens[nxt]
    return nxt
