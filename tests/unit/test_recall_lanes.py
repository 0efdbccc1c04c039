"""Recall's lanes, pure parts: which memory entries are trusted, which lines of a chunk lane 1 cites, and
the extractive stand-in for the sub-agent's sentence."""

from cairn.recall.memory_queries import ChunkDetail
from cairn.recall.memory_search import Hit
from cairn.recall.recall_block import Cited
from cairn.recall.recall_lanes import extractive, matching_lines, trusted
from cairn.text import build_query


def _hit(text: str, start: int = 1, path: str = "MEMORY.md") -> Hit:
    lines = text.count("\n") + 1
    detail = ChunkDetail(
        "c1", "memory", path, None, None, start, start + lines - 1, text, [], [], None, None, None, frozenset(), None
    )
    return Hit(detail, 0.8, text[:700], "/v1/memory/files/MEMORY.md")


def _terms(query: str) -> tuple[str, ...]:
    parsed = build_query(query)
    assert parsed is not None
    return parsed.terms


def test_only_memory_md_and_bank_files_are_trusted() -> None:
    assert trusted("MEMORY.md")
    assert trusted("memory/bank/food.md")
    assert not trusted("memory/daily/2026-12-01.md")
    assert not trusted("memory/snapshots/2026-12-01-0930.md")
    assert not trusted("memory/summaries/week.md")
    assert not trusted(None)


def test_lane1_cites_the_lines_that_hold_the_asked_words() -> None:
    hit = _hit("# About the user\n- lives in Lisbon\n- allergic to peanuts\n- likes chess", start=10)
    assert matching_lines(hit, _terms("allergic to peanuts")) == [
        Cited("MEMORY.md", 12, 12, "- allergic to peanuts", 0.8)
    ]


def test_lines_with_at_least_half_of_the_best_lines_words_are_cited_too_most_first() -> None:
    hit = _hit("- 他不吃辣\n- 他对花生过敏，也不吃辣椒\n- 他喜欢下棋")
    cited = matching_lines(hit, _terms("花生过敏"))
    assert [c.start_line for c in cited] == [2]
    both = matching_lines(hit, _terms("不吃辣 花生"))
    assert [c.start_line for c in both] == [2, 1]


def test_a_chunk_found_by_meaning_only_is_cited_whole() -> None:
    hit = _hit("- likes chess\n- plays on weekends", start=3)
    assert matching_lines(hit, _terms("board games")) == [Cited("MEMORY.md", 3, 4, hit.snippet, 0.8)]


def test_a_cited_line_is_redacted() -> None:
    hit = _hit("- wifi password: hunter2 api_key=sk-abcdefghijklmnopqrstuvwx")
    (cited,) = matching_lines(hit, _terms("wifi password"))
    assert "sk-abcdefghijklmnopqrstuvwx" not in cited.snippet


def test_the_extractive_summary_takes_the_best_hits_with_the_day_they_were_said() -> None:
    hits = [
        {"snippet": "我喜欢咖啡", "score": 0.3, "session_key": "agent:main:main"},
        {"snippet": "下周二我去上海参加产品发布会", "score": 0.9, "session_key": "agent:main:main",
         "said_at": "2026-12-05T09:30:00+00:00"},
        {"snippet": "- 周三开会讨论了预算", "score": 0.2, "path": "memory/daily/2026-12-04.md"},
    ]  # fmt: skip
    assert extractive(hits) == "(2026-12-05) 下周二我去上海参加产品发布会; 我喜欢咖啡"
    assert extractive([]) is None
    long = extractive([{"snippet": "word " * 100, "score": 1.0}])
    assert long is not None
    assert len(long) <= 220


def test_a_weak_hit_is_no_extractive_summary() -> None:
    note = {"snippet": "- 周三开会讨论了预算", "score": 0.29, "path": "memory/daily/2026-12-04.md"}
    assert extractive([note]) is None
    assert extractive([{"snippet": "什么都行", "score": 0.05, "session_key": "agent:main:main"}]) is None
    assert extractive([{"snippet": "下周二去上海", "score": 0.2, "session_key": "agent:main:main"}]) == "下周二去上海"
