"""The record decisions and the bank rendering, without I/O: repetition is never a contradiction (mem0 1674),
supersede stays inside one entity and relation (graphiti 1728), events and plans are never merged, the grey zone
asks a model or stays pending, and a render never writes over a person's line."""

from datetime import UTC, date, datetime

from cairn.consolidation.bank import BankLine, fact_of, line_edits, record_line, render
from cairn.consolidation.candidates import Candidate, Kind, Provenance
from cairn.consolidation.records import (
    Added,
    Duplicate,
    Judge,
    Neighbour,
    Unchanged,
    content_hash,
    decide,
    normalized,
    without_model,
)

SAID = datetime(2026, 12, 6, 9, 30, tzinfo=UTC)


def candidate(
    text: str, kind: Kind = "preference", entity: str = "user", relation: str = "spicy food", **more: object
) -> Candidate:
    provenance = Provenance("agent:main:main", "s", ("m1",), "owner", SAID)
    return Candidate(kind, text, entity, relation, 0.8, text, provenance, **more)  # type: ignore[arg-type]


def neighbour(
    record_id: str,
    similarity: float | None,
    kind: Kind = "preference",
    entity: str = "user",
    relation: str = "spicy food",
) -> Neighbour:
    return Neighbour(record_id, kind, entity, relation, f"hash-{record_id}", SAID, similarity, "stored")


def test_normalized_folds_case_width_punctuation_and_spaces() -> None:
    assert normalized("  I'm VEGAN!! ") == normalized("i m vegan") == "i m vegan"
    assert normalized("我不吃辣。") == normalized("我不吃辣")


def test_the_same_words_are_unchanged_whatever_the_similarity() -> None:
    c = candidate("I eat spicy food")
    existing = Neighbour("r1", "preference", "user", "spicy food", content_hash(c), SAID, None)
    assert decide(c, content_hash(c), [existing]) == Unchanged("r1")


def test_a_repetition_in_other_words_is_a_duplicate_never_a_contradiction() -> None:
    c = candidate("I really like spicy food")
    assert decide(c, content_hash(c), [neighbour("r1", 0.95)]) == Duplicate("r1", 0.95)


def test_a_new_value_for_the_same_entity_and_relation_supersedes() -> None:
    c = candidate("I prefer mild food")
    assert decide(c, content_hash(c), [neighbour("r1", 0.4)]) == Added(supersedes=("r1",))


def test_a_correction_supersedes_even_when_its_vector_is_close() -> None:
    c = candidate("I don't eat spicy food any more", correction=True)
    assert decide(c, content_hash(c), [neighbour("r1", 0.96)]) == Added(supersedes=("r1",))


def test_another_entity_is_never_touched() -> None:
    c = candidate("She likes spicy food", entity="user's sister")
    decision = decide(c, content_hash(c), [neighbour("r1", 0.97), neighbour("r2", 0.3)])
    assert decision == Added()


def test_another_relation_of_the_same_entity_is_not_superseded() -> None:
    c = candidate("I live in Lisbon", kind="profile", relation="home city")
    assert decide(c, content_hash(c), [neighbour("r1", 0.3, kind="profile", relation="job")]) == Added()


def test_events_and_plans_are_never_merged_nor_superseded() -> None:
    kinds: tuple[Kind, ...] = ("event", "plan")
    for kind in kinds:
        c = candidate("Went to the gym", kind=kind, relation="gym")
        assert decide(c, content_hash(c), [neighbour("r1", 0.99, kind=kind, relation="gym")]) == Added()


def test_the_same_event_on_another_day_is_another_event() -> None:
    monday = candidate("Went to the gym", kind="event", valid_from=datetime(2026, 12, 7, tzinfo=UTC))
    tuesday = candidate("Went to the gym", kind="event", valid_from=datetime(2026, 12, 8, tzinfo=UTC))
    assert content_hash(monday) != content_hash(tuesday)


def test_the_grey_zone_asks_the_model_and_follows_its_verdict() -> None:
    c = candidate("I like food with a little heat")
    neighbours = [neighbour("r1", 0.8)]
    assert decide(c, content_hash(c), neighbours) == Judge("r1", 0.8)
    assert decide(c, content_hash(c), neighbours, "same") == Duplicate("r1", 0.8)
    assert decide(c, content_hash(c), neighbours, "update") == Added(supersedes=("r1",))
    assert decide(c, content_hash(c), neighbours, "different") == Added()


def test_without_a_model_the_grey_zone_is_kept_as_new_and_pending() -> None:
    c = candidate("I like food with a little heat")
    assert without_model(decide(c, content_hash(c), [neighbour("r1", 0.8)])) == Added(pending="judgement")


def test_a_record_line_carries_its_date_in_the_records_language() -> None:
    assert record_line("I eat spicy food", "en", date(2026, 12, 6)) == "- I eat spicy food (noted on 2026-12-06)"
    assert record_line("我不吃辣", "zh", date(2026, 12, 6)) == "- 我不吃辣（记于 2026-12-06）"
    assert fact_of("- 我不吃辣（记于 2026-12-06）") == "我不吃辣"
    assert fact_of("* I eat spicy food (noted on 2026-12-06)") == "I eat spicy food"


def test_a_render_keeps_a_persons_lines_drops_retired_lines_and_appends_new_ones() -> None:
    old_line, mine = "- I eat spicy food (noted on 2026-12-01)", "- my own note, written by hand"
    current = f"# Preferences\n\n{old_line}\n{mine}\n"
    records = [
        BankLine("r1", old_line, old_line, current=False),
        BankLine("r2", "- I don't eat spicy food (noted on 2026-12-06)", None, current=True),
    ]
    rendered = render(current, "preference", records)
    assert rendered.text == f"# Preferences\n\n{mine}\n- I don't eat spicy food (noted on 2026-12-06)\n"
    assert rendered.placements == {"r2": (4, "- I don't eat spicy food (noted on 2026-12-06)")}


def test_a_first_render_starts_the_file_with_its_title() -> None:
    rendered = render(None, "profile", [BankLine("r1", "- I live in Lisbon (noted on 2026-12-06)", None, True)])
    assert rendered.text == "# Profile\n\n- I live in Lisbon (noted on 2026-12-06)\n"


def test_an_edited_line_updates_its_record_and_a_removed_line_retires_its_record() -> None:
    a, b, c = (
        "- likes tea (noted on 2026-12-01)",
        "- lives in Lisbon (noted on 2026-12-01)",
        "- has a cat (noted on 2026-12-01)",
    )
    before = f"# Profile\n\n{a}\n{b}\n{c}\n"
    after = "# Profile\n\n- likes green tea\n" + f"{c}\n"
    owned = [BankLine("ra", a, a, True), BankLine("rb", b, b, True), BankLine("rc", c, c, True)]
    edits = line_edits(before, after, owned)
    assert [(e.record_id, e.line) for e in edits] == [("ra", "- likes green tea"), ("rb", None)]


def test_moving_a_line_or_editing_a_persons_line_touches_no_record() -> None:
    a, mine = "- likes tea (noted on 2026-12-01)", "- my note"
    before = f"{a}\n{mine}\n"
    assert line_edits(before, f"- my note, edited\n{a}\n", [BankLine("ra", a, a, True)]) == []


def test_in_a_rewritten_block_each_record_follows_the_line_most_like_it() -> None:
    a, b = "- I live in Porto (noted on 2026-12-01)", "- I work as a nurse (noted on 2026-12-01)"
    owned = [BankLine("ra", a, a, True), BankLine("rb", b, b, True)]
    edits = line_edits(f"{a}\n{b}\n", "- a line of my own\n- I live in Braga\n", owned)
    assert [(e.record_id, e.line) for e in edits] == [("ra", "- I live in Braga"), ("rb", None)]
