"""Memory documents cut entry by entry: list items, nested and loose items, paragraphs, headings and labels as
context, fences, CJK text and long entries, each span a run of whole lines whose numbers are those of the
document, for every document path (not only trusted ones)."""

from datetime import UTC, datetime

from cairn.memindex import MemoryIndexSettings
from cairn.memindex.chunking import Span, estimate_tokens
from cairn.memindex.embeddings import NoEmbedder
from cairn.memindex.entries import chunk_entries
from cairn.memindex.indexing import MemoryIndex
from cairn.text import index_terms

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


def test_each_item_and_paragraph_is_a_chunk_of_its_own_lines_named_by_its_headings() -> None:
    lines = FACTS.splitlines()
    spans = chunk_entries(lines)
    assert _ranges(spans) == [(1, 1), (2, 2), (3, 4), (5, 5), (7, 8), (11, 11)]
    _check_exact(lines, spans)
    assert spans[1].text == "- The user lives in Lisbon"
    assert spans[2].text == "- The user works night shifts as a nurse\n  at the Santa Maria hospital"
    # every entry of a section is named by its heading, not only the first one under it
    assert [s.context for s in spans[:5]] == ["# About the user"] * 5
    assert spans[5].context == "# About the user\n## Diet"


def test_a_label_item_names_each_of_its_nested_items_and_is_no_chunk_of_its_own() -> None:
    lines = [
        "- Pets:",
        "  - a cat called Miso, who is twelve",
        "  - a dog called Rex, afraid of thunder",
        "- Works as a nurse at the Santa Maria hospital",
        "  1. night shifts on weekends and Mondays",
    ]
    spans = chunk_entries(lines)
    assert _ranges(spans) == [(1, 1), (2, 2), (3, 3), (4, 4)]
    _check_exact(lines, spans)
    assert [s.context for s in spans] == ["- Pets:", "- Pets:", "", "- Works as a nurse at the Santa Maria hospital"]


def test_an_item_ending_in_a_colon_without_nested_items_is_an_entry() -> None:
    lines = ["- Favourite quote:", "", "Stay hungry, stay foolish."]
    assert _ranges(chunk_entries(lines)) == [(0, 0), (2, 2)]


def test_a_loose_item_keeps_its_indented_paragraphs_and_a_flush_paragraph_ends_it() -> None:
    lines = [
        "- The user plays the cello",
        "",
        "  every Sunday, with a quartet in Alfama.",
        "",
        "- The user is learning Portuguese",
        "",
        "A paragraph of its own, flush left.",
    ]
    spans = chunk_entries(lines)
    assert _ranges(spans) == [(0, 2), (4, 4), (6, 6)]
    _check_exact(lines, spans)


def test_a_loose_nested_item_keeps_its_paragraph_and_its_label() -> None:
    lines = ["- Pets:", "  - a cat called Miso", "", "    who is twelve", "  - a dog called Rex"]
    spans = chunk_entries(lines)
    assert _ranges(spans) == [(1, 3), (4, 4)]
    assert [s.context for s in spans] == ["- Pets:", "- Pets:"]


def test_short_entries_stay_apart_and_headings_nest() -> None:
    lines = ["- tea", "- jazz", "# Work", "## Shifts", "- nights", "# Home", "- Lisbon"]
    spans = chunk_entries(lines)
    assert _ranges(spans) == [(0, 0), (1, 1), (4, 4), (6, 6)]
    assert [s.context for s in spans] == ["", "", "# Work\n## Shifts", "# Home"]


def test_a_heading_with_nothing_under_it_is_its_own_chunk() -> None:
    spans = chunk_entries(["# Empty", "", "# Next", "body of the next section", "## Last"])
    assert _ranges(spans) == [(0, 0), (3, 3), (4, 4)]
    assert [s.context for s in spans] == ["", "# Next", "# Next"]


def test_a_fenced_block_is_one_entry_even_with_markers_inside() -> None:
    lines = ["```", "# not a heading", "- not an item", "```", "- after the fence, a fact"]
    assert _ranges(chunk_entries(lines)) == [(0, 3), (4, 4)]


def test_cjk_entries_are_cut_and_counted_by_character() -> None:
    lines = ["# 关于用户", "- 用户对花生过敏", "- 下周二我去上海参加产品发布会", "", "他忌口，不吃辣椒。周末常去爬山。",
             "- 爱好：", "  - 弹钢琴"]  # fmt: skip
    spans = chunk_entries(lines)
    assert _ranges(spans) == [(1, 1), (2, 2), (4, 4), (6, 6)]
    assert spans[-1].context == "# 关于用户\n- 爱好："
    _check_exact(lines, spans)


def test_a_long_entry_falls_back_to_windows_within_its_own_lines_each_with_its_context() -> None:
    body = [f"line {i:02d} of a long paragraph " + "word " * 20 for i in range(40)]  # ~32 tokens a line
    lines = ["# Notes", "- a short fact before the long one", "", *body, "", "- a short fact after it, on its own"]
    spans = chunk_entries(lines, max_tokens=200, overlap=40)
    assert _ranges(spans)[0] == (1, 1)
    assert _ranges(spans)[-1] == (44, 44)
    windows = spans[1:-1]
    assert len(windows) > 3
    assert windows[0].first == 3
    assert windows[-1].last == 42
    assert all(3 <= s.first <= s.last <= 42 for s in windows)
    assert all(estimate_tokens(s.text) <= 200 + 1 for s in windows)
    assert all(s.context == "# Notes" for s in spans)
    _check_exact(lines, spans)


def test_a_single_line_too_long_for_a_chunk_is_cut_into_pieces_with_its_line_number() -> None:
    lines = ["- short", "- " + "字" * 900]
    spans = chunk_entries(lines, max_tokens=400, overlap=80)
    assert {(s.first, s.last) for s in spans[1:]} == {(1, 1)}
    assert "".join(s.text for s in spans[1:]).endswith("字" * 100)


FOUR_FACTS = """# 2026-12-05
- Booked the dentist for Thursday at 9
- Ana's new phone number ends in 4471
- The kitchen tap leaks again; the plumber comes Monday
- Finished reading The Name of the Rose
"""


def test_every_memory_document_is_cut_by_entry_not_only_trusted_ones() -> None:
    index = MemoryIndex(NoEmbedder(), MemoryIndexSettings())
    at = datetime(2026, 12, 6, tzinfo=UTC)
    for path in ("MEMORY.md", "memory/bank/people.md", "memory/daily/2026-12-05.md", "memory/snapshots/s.md", "x.md"):
        rows = index.document_rows(path, 1, FOUR_FACTS, at)
        assert [(r.start_line, r.end_line) for r in rows] == [(2, 2), (3, 3), (4, 4), (5, 5)]
        assert [r.context for r in rows] == ["# 2026-12-05"] * 4


def test_a_chunk_is_searched_by_its_context_and_its_lines_but_stores_only_its_lines() -> None:
    index = MemoryIndex(NoEmbedder(), MemoryIndexSettings())
    rows = index.document_rows("memory/bank/people.md", 1, FACTS, datetime(2026, 12, 6, tzinfo=UTC))
    diet = rows[-1]
    assert diet.text == "Vegetarian since 2019, eats fish on holidays."
    assert diet.searched == "# About the user\n## Diet\nVegetarian since 2019, eats fish on holidays."
    assert "diet" in diet.terms
    assert "diet" not in index_terms(diet.text)
    # the same lines under another heading are another chunk to embed (a vector is reused by content hash)
    moved = index.document_rows("MEMORY.md", 1, "## Food\n" + diet.text, datetime(2026, 12, 6, tzinfo=UTC))[0]
    assert moved.text == diet.text
    assert moved.content_hash != diet.content_hash
