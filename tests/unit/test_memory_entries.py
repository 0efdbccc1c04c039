"""Trusted documents cut entry by entry: list items, nested items, paragraphs, headings, fences, CJK text and
long entries, each span a run of whole lines whose numbers are those of the document."""

from datetime import UTC, datetime

from cairn.events.documents import trusted_path
from cairn.memindex import MemoryIndexSettings
from cairn.memindex.chunking import Span, estimate_tokens
from cairn.memindex.embeddings import NoEmbedder
from cairn.memindex.entries import MERGE_TOKENS, chunk_entries
from cairn.memindex.indexing import MemoryIndex

FACTS = """# About the user
- The user is allergic to peanuts
- The user lives in Lisbon
- The user works night shifts as a nurse
  at the Santa Maria hospital
* The user has two cats, Miso and Tofu

The user's sister Ana is getting married in
June, in Porto.

## Diet
Vegetarian since 2019, eats fish on holidays.
"""


def _ranges(spans: list[Span]) -> list[tuple[int, int]]:
    return [(s.first, s.last) for s in spans]


def _check_exact(lines: list[str], spans: list[Span]) -> None:
    for span in spans:
        assert span.text == "\n".join(lines[span.first : span.last + 1])


def test_each_item_paragraph_and_headed_section_is_a_chunk_with_its_own_lines() -> None:
    lines = FACTS.splitlines()
    spans = chunk_entries(lines)
    assert _ranges(spans) == [(0, 1), (2, 2), (3, 4), (5, 5), (7, 8), (10, 11)]
    _check_exact(lines, spans)
    assert spans[1].text == "- The user lives in Lisbon"
    assert spans[2].text == "- The user works night shifts as a nurse\n  at the Santa Maria hospital"


def test_nested_items_are_entries_and_a_fragment_of_a_parent_joins_its_first_child() -> None:
    lines = [
        "- Pets:",
        "  - a cat called Miso, who is twelve",
        "  - a dog called Rex, afraid of thunder",
        "- Works as a nurse at the Santa Maria hospital",
        "  1. night shifts on weekends and Mondays",
    ]
    spans = chunk_entries(lines)
    assert _ranges(spans) == [(0, 1), (2, 2), (3, 3), (4, 4)]
    _check_exact(lines, spans)


def test_very_short_entries_merge_up_to_the_budget_and_never_across_a_heading() -> None:
    lines = ["- tea", "- jazz", "- rain", "# Work", "- nurse"]
    spans = chunk_entries(lines)
    assert _ranges(spans) == [(0, 2), (3, 4)]  # "- tea" takes in "- jazz", still short, then "- rain"
    lone = chunk_entries(["- ok", "# Next heading", "- The user plays the cello every Sunday"])
    assert _ranges(lone) == [(0, 0), (1, 2)]
    assert all(estimate_tokens(s.text) <= MERGE_TOKENS for s in spans)


def test_a_heading_with_nothing_under_it_is_its_own_chunk() -> None:
    assert _ranges(chunk_entries(["# Empty", "", "# Next", "body of the next section"])) == [(0, 0), (2, 3)]


def test_a_fenced_block_is_one_entry_even_with_markers_inside() -> None:
    lines = ["```", "# not a heading", "- not an item", "```", "- after the fence, a fact"]
    assert _ranges(chunk_entries(lines)) == [(0, 3), (4, 4)]


def test_cjk_entries_are_cut_and_counted_by_character() -> None:
    lines = ["# 关于用户", "- 用户对花生过敏", "- 下周二我去上海参加产品发布会", "", "他忌口，不吃辣椒。周末常去爬山。"]
    spans = chunk_entries(lines)
    assert _ranges(spans) == [(0, 1), (2, 2), (4, 4)]
    _check_exact(lines, spans)


def test_a_long_entry_falls_back_to_windows_within_its_own_lines() -> None:
    body = [f"line {i:02d} of a long paragraph " + "word " * 20 for i in range(40)]  # ~32 tokens a line
    lines = ["- a short fact before the long one", "", *body, "", "- a short fact after it, on its own"]
    spans = chunk_entries(lines, max_tokens=200, overlap=40)
    assert _ranges(spans)[0] == (0, 0)
    assert _ranges(spans)[-1] == (43, 43)
    windows = spans[1:-1]
    assert len(windows) > 3
    assert windows[0].first == 2
    assert windows[-1].last == 41
    assert all(2 <= s.first <= s.last <= 41 for s in windows)
    assert all(estimate_tokens(s.text) <= 200 + 1 for s in windows)
    _check_exact(lines, spans)


def test_a_single_line_too_long_for_a_chunk_is_cut_into_pieces_with_its_line_number() -> None:
    lines = ["- short", "- " + "字" * 900]
    spans = chunk_entries(lines, max_tokens=400, overlap=80)
    assert {(s.first, s.last) for s in spans[1:]} == {(1, 1)}
    assert "".join(s.text for s in spans[1:]).endswith("字" * 100)


def test_only_trusted_documents_are_cut_by_entry() -> None:
    index = MemoryIndex(NoEmbedder(), MemoryIndexSettings())
    at = datetime(2026, 12, 6, tzinfo=UTC)
    for path in ("MEMORY.md", "memory/bank/people.md"):
        assert trusted_path(path)
        rows = index.document_rows(path, 1, FACTS, at)
        assert [(r.start_line, r.end_line) for r in rows] == [(1, 2), (3, 3), (4, 5), (6, 6), (8, 9), (11, 12)]
    for path in ("memory/daily/2026-12-05.md", "memory/snapshots/s.md", "memory/summaries/x.md", "MEMORY.md.bak"):
        assert not trusted_path(path)
        rows = index.document_rows(path, 1, FACTS, at)
        assert [(r.start_line, r.end_line) for r in rows] == [(1, 12)]
