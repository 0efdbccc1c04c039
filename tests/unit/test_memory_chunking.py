"""Chunking of documents and transcripts: sizes, overlap, line ranges, breaks, and the prefix stability
that lets a growing transcript be re-chunked from its last chunk only."""

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from cairn.memindex.chunking import chunk_lines, estimate_tokens, split_long
from cairn.memindex.transcripts import Turn, render_turn, sitting_breaks, turn_in_context

LINE = "word " * 19 + "end"  # 99 characters: 25 tokens


def test_token_estimate_counts_cjk_characters_one_each() -> None:
    assert estimate_tokens("abcd" * 10) == 10
    assert estimate_tokens("他忌口，不吃辣椒") == 8  # seven ideographs, and the comma as a Latin-rate char
    assert estimate_tokens("") == 0


def test_chunks_stay_under_the_budget_and_overlap_by_about_80_tokens() -> None:
    lines = [f"{i:02d} {LINE}" for i in range(60)]
    spans = chunk_lines(lines, max_tokens=400, overlap=80)
    assert len(spans) > 3
    for span in spans:
        assert sum(estimate_tokens(line) for line in lines[span.first : span.last + 1]) <= 400
        assert span.text == "\n".join(lines[span.first : span.last + 1])
    for before, after in itertools.pairwise(spans):
        shared = lines[after.first : before.last + 1]
        assert 0 < sum(estimate_tokens(line) for line in shared) <= 80
    assert spans[0].first == 0
    assert spans[-1].last == 59


def test_every_line_is_in_some_chunk() -> None:
    lines = [f"line {i} " + "x" * (i * 37 % 900) for i in range(80)]
    spans = chunk_lines(lines, max_tokens=120, overlap=30)
    covered = {i for s in spans for i in range(s.first, s.last + 1)}
    assert covered == set(range(80))


def test_a_line_longer_than_a_chunk_is_cut_into_pieces_with_its_line_number() -> None:
    long = "字" * 1000
    spans = chunk_lines(["before", long, "after"], max_tokens=400, overlap=80)
    pieces = [s for s in spans if s.first == s.last == 1]
    assert [len(p.text) for p in pieces] == [400, 400, 200]
    assert "".join(p.text for p in pieces) == long
    assert spans[0].text == "before"
    assert spans[-1].text == "after"


def test_split_long_keeps_every_character() -> None:
    text = "abc_" * 700 + "中文" * 300
    pieces = split_long(text, 100)
    assert "".join(pieces) == text
    assert all(estimate_tokens(piece) <= 100 for piece in pieces)


def test_no_chunk_spans_a_break_and_nothing_is_carried_across_it() -> None:
    lines = [f"{i} {LINE}" for i in range(10)]
    spans = chunk_lines(lines, max_tokens=400, overlap=80, breaks=frozenset({4}))
    assert [(s.first, s.last) for s in spans] == [(0, 3), (4, 9)]


@pytest.mark.parametrize("cut", [5, 17, 33, 58])
def test_rechunking_from_the_last_chunk_start_equals_chunking_everything(cut: int) -> None:
    """What the indexer relies on when a transcript grows: earlier chunks never move."""
    lines = [f"{i} " + LINE * (1 + i % 3) for i in range(60)]
    before = chunk_lines(lines[:cut], 400, 80)
    last_start = before[-1].first
    tail = chunk_lines(lines[last_start:], 400, 80)
    rebuilt = [(s.first, s.last) for s in before[:-1]] + [(s.first + last_start, s.last + last_start) for s in tail]
    assert rebuilt == [(s.first, s.last) for s in chunk_lines(lines, 400, 80)]


def _turn(position: int, minutes: float, reset: int = 0, role: str = "user", name: str | None = None) -> Turn:
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes)
    return Turn(position, reset, f"00000000-0000-0000-0000-{position:012d}", role, name, "hi\nthere", at)


def test_turns_render_as_user_and_assistant_lines_with_the_speaker() -> None:
    assert render_turn(_turn(1, 0)) == "User: hi there"
    assert render_turn(_turn(2, 0, role="assistant")) == "Assistant: hi there"
    assert render_turn(_turn(3, 0, name="Caroline")) == "User (Caroline): hi there"


def test_a_reset_or_a_pause_of_hours_starts_a_new_sitting() -> None:
    turns = [_turn(1, 0), _turn(2, 5), _turn(4, 6, reset=1), _turn(5, 7, reset=1), _turn(6, 7 + 4 * 60, reset=1)]
    assert sitting_breaks(turns) == frozenset({2, 4})


def test_a_turn_is_embedded_after_the_line_before_it_in_its_sitting() -> None:
    question, answer = _turn(1, 0, name="Ana"), _turn(2, 1, role="assistant")
    assert turn_in_context(question, answer) == "User (Ana): hi there\nAssistant: hi there"
    assert turn_in_context(None, question) == "User (Ana): hi there"  # the first of its session
    assert turn_in_context(question, _turn(2, 1, reset=1)) == "User: hi there"  # after a reset
    assert turn_in_context(question, _turn(2, 4 * 60)) == "User: hi there"  # hours later
