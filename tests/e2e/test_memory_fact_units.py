"""Fact-level memory search end to end (issue 30): every memory document, a daily note as much as a bank file, is
searched entry by entry, so a small note of unrelated facts is not one chunk whose vector matches none of them;
and results come back in the order of the score they show, whatever MMR and time decay did to them."""

from datetime import UTC, datetime, timedelta

import pytest

from cairn.local import LocalStack
from tests.conftest import Tenant
from tests.e2e.test_memory_search import Memory, _indexed

pytestmark = pytest.mark.e2e

TODAY = datetime.now(UTC).date()
NOTE = f"memory/daily/{TODAY.isoformat()}.md"
FOUR_FACTS = [
    "- Booked the dentist for Thursday at 9am",
    "- Ana's new phone number ends in 4471",
    "- The kitchen tap is leaking again; the plumber comes on Monday",
    "- 我最近在读《玫瑰的名字》",
]


@pytest.fixture
def memory(services: LocalStack, tenant: Tenant) -> Memory:
    return Memory(services, tenant)


@pytest.mark.parametrize(
    ("query", "line"),
    [
        ("when is my dental appointment?", 1),
        ("what is Ana's phone number?", 2),
        ("who is fixing the leak in the kitchen?", 3),
        ("which novel am I reading at the moment?", 4),  # asked in English, noted in Chinese
    ],
)
def test_each_fact_of_a_small_daily_note_is_found_as_its_own_line(memory: Memory, query: str, line: int) -> None:
    memory.write({NOTE: "\n".join(FOUR_FACTS) + "\n"})
    assert memory.settle(lambda: _indexed(memory, len(FOUR_FACTS)))
    hit = memory.search(query)[0]
    assert (hit["path"], hit["start_line"], hit["end_line"]) == (NOTE, line, line), hit
    assert hit["snippet"] == FOUR_FACTS[line - 1]
    opened = memory.tenant.recall.get(hit["citation"])
    assert opened.status_code == 200, hit["citation"]
    assert opened.json()["text"].strip() == FOUR_FACTS[line - 1]


def test_entries_under_a_heading_are_found_by_the_heading_they_sit_under(memory: Memory) -> None:
    people = "# Ana\n- moved to Porto in May\n- works as an architect\n# Rui\n- plays chess"
    memory.write({"memory/bank/people.md": people})
    assert memory.settle(lambda: _indexed(memory, 3))
    found = {(r["start_line"], r["end_line"]) for r in memory.search("Ana", min_score=0.1)}
    assert {(2, 2), (3, 3)} <= found  # both of Ana's entries, not only the first one under her heading
    assert (5, 5) not in found


def test_results_come_back_sorted_by_the_score_they_show(memory: Memory) -> None:
    # Two near-duplicate entries: MMR picks the second of them after less similar chunks of lower scores, and an
    # old daily note saying the same thing decays to a quarter; the list is still in the order of its scores.
    old = TODAY - timedelta(days=60)
    memory.write({
        "memory/bank/a.md": "- The user drinks green tea every morning",
        "memory/bank/b.md": "- Every morning the user drinks a cup of green tea",
        "memory/bank/c.md": "- The user prefers coffee after lunch",
        f"memory/daily/{old.isoformat()}.md": "- The user drinks green tea every morning",
        NOTE: "\n".join(FOUR_FACTS),
    })  # fmt: skip
    assert memory.settle(lambda: _indexed(memory, 4 + len(FOUR_FACTS)))
    for query in ("does the user drink tea in the morning?", "when is my dental appointment?", "green tea"):
        results = memory.search(query, limit=10)
        scores = [r["score"] for r in results]
        assert len(scores) >= 5, results
        assert scores == sorted(scores, reverse=True), [(r["path"], r["start_line"], r["score"]) for r in results]
    paths = [r["path"] for r in memory.search("does the user drink tea in the morning?", limit=10)]
    assert paths[:2] in (["memory/bank/a.md", "memory/bank/b.md"], ["memory/bank/b.md", "memory/bank/a.md"])
