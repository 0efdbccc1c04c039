"""`cairn bench retrieval --mode notes`: a sitting as a note, and a hit's lines back to the turns they hold."""

from cairn.cli.bench_retrieval_notes import _note_path, note_of, ranked_turns
from cairn.memindex.indexing import dated_note


def test_a_sitting_is_a_heading_then_one_item_per_turn_at_an_undated_path() -> None:
    rows = [
        {"doc_id": "u0/2023-04-27/0", "timestamp": "2023-04-27", "text": "张曼婷: 你好\nAI: 你好，张曼婷"},
        {"doc_id": "u0/2023-04-27/1", "timestamp": "2023-04-27", "text": "张曼婷: 我喜欢绘画"},
    ]
    assert note_of(rows) == "# 2023-04-27\n\n- 张曼婷: 你好 / AI: 你好，张曼婷\n- 张曼婷: 我喜欢绘画\n"
    said = [{"doc_id": "c/D1:1", "timestamp": "8 May, 2023", "speaker": "Caroline", "text": "I went to a group."}]
    assert note_of(said) == "# 8 May, 2023\n\n- Caroline: I went to a group.\n"
    assert note_of([{**rows[0], "speaker": "张曼婷"}]) == "# 2023-04-27\n\n- 张曼婷: 你好 / AI: 你好，张曼婷\n"
    path = _note_path("u0/2023-04-27")
    assert path.startswith("memory/summaries/")
    assert dated_note(path) is None  # a 2023 note must not decay to nothing


def test_hits_name_the_turns_of_their_lines_in_the_order_listed_each_once() -> None:
    turns = {"memory/summaries/a.md": ["a0", "a1", "a2"], "memory/summaries/b.md": ["b0"]}
    hits = [
        {"path": "memory/summaries/a.md", "start_line": 4, "end_line": 5},
        {"path": "memory/summaries/b.md", "start_line": 1, "end_line": 3},  # the heading, a blank line, then b0
        {"path": "memory/summaries/a.md", "start_line": 3, "end_line": 4},
    ]
    assert ranked_turns(hits, turns) == ["a1", "a2", "b0", "a0"]
