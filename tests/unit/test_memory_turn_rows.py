"""A transcript turn stored as `infinity` or `-infinity` (0001-01-01T00:00:00Z from a release before issue 28)
reads back from asyncpg as a naive `datetime.min`/`max`: the memory index reads it as an aware time, so the
sitting rules compare it like any other turn instead of raising TypeError and stopping the worker for good."""

from datetime import UTC, datetime

from cairn.memindex.store import _turn
from cairn.memindex.transcripts import sitting_breaks, turn_in_context


def row(position: int, occurred_at: datetime) -> dict[str, object]:
    return {
        "position": position, "reset_index": 0, "message_id": f"m{position}", "role": "user", "sender_name": None,
        "text": f"turn {position}", "occurred_at": occurred_at, "external_id": None,
    }  # fmt: skip


def test_turns_stored_as_infinity_are_sittings_of_their_own() -> None:
    now = datetime(2026, 11, 29, 9, 30, tzinfo=UTC)
    turns = [_turn(row(1, datetime.min)), _turn(row(2, now)), _turn(row(3, now)), _turn(row(4, datetime.max))]
    assert [t.occurred_at for t in (turns[0], turns[3])] == [datetime.min.replace(tzinfo=UTC),
                                                             datetime.max.replace(tzinfo=UTC)]  # fmt: skip
    assert sitting_breaks(turns) == frozenset({1, 3})
    assert turn_in_context(turns[0], turns[1]) == "User: turn 2"
    assert turn_in_context(turns[1], turns[2]) == "User: turn 2\nUser: turn 3"
