"""History and listing rules without I/O: window choice, redaction before capping, the byte budget,
backwards paging, the listing cursor."""

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest

from cairn.recall.history import (
    RESPONSE_BYTES,
    TEXT_CHARS,
    BadCursor,
    Cursor,
    HistoryMessage,
    HistoryWindow,
    PageRequest,
    StoredMessage,
    build_page,
    cap_text,
    choose_window,
    decode_cursor,
    encode_cursor,
    fit_to_budget,
    omitted_marker,
    roles_shown,
    to_message,
)
from cairn.text import redact

T0 = datetime(2026, 11, 29, 1, 30, tzinfo=UTC)
SESSION_ID = "0190c5e4-0000-7000-8000-000000000001"
WINDOW = HistoryWindow(reset_index=0, has_earlier_windows=False)


def stored(position: int, text: str = "hello", role: str = "user", sender: str | None = "Alice") -> StoredMessage:
    return StoredMessage(
        message_id=f"00000000-0000-4000-8000-{position:012d}",
        role=role,
        sender_name=sender,
        text=text,
        occurred_at=T0 + timedelta(minutes=position),
        recorded_at=T0 + timedelta(minutes=position, seconds=1),
        position=position,
    )


def request(limit: int = 50, offset: int = 0, max_bytes: int = RESPONSE_BYTES) -> PageRequest:
    return PageRequest("agent:main:main", SESSION_ID, WINDOW, limit, offset, max_bytes)


def newest_first(window: list[StoredMessage], limit: int, offset: int) -> list[StoredMessage]:
    """What the store answers: up to `limit` rows from `offset`, counting back from the newest."""
    return list(reversed(window))[offset : offset + limit]


# --- windows and roles ---------------------------------------------------------------------------


def test_the_latest_window_is_read_unless_a_message_anchors_an_earlier_one() -> None:
    assert choose_window(current=3, anchor=None) == 3
    assert choose_window(current=3, anchor=1) == 1
    assert choose_window(current=3, anchor=3) == 3
    assert choose_window(current=0, anchor=0) == 0


def test_tool_and_system_entries_are_shown_only_on_request() -> None:
    assert roles_shown(include_tools=False) == ("user", "assistant")
    assert set(roles_shown(include_tools=True)) == {"user", "assistant", "tool", "system"}


# --- text capping and redaction ------------------------------------------------------------------


def test_text_at_the_cap_is_whole_and_one_more_character_is_cut() -> None:
    assert cap_text("a" * TEXT_CHARS) == ("a" * TEXT_CHARS, False)
    assert cap_text("a" * (TEXT_CHARS + 1)) == ("a" * TEXT_CHARS, True)
    assert cap_text("上" * 5000) == ("上" * TEXT_CHARS, True)


def test_a_secret_across_the_cut_is_masked_before_the_cut() -> None:
    secret = "sk-" + "A1b2C3d4E5" * 4
    text, truncated = cap_text("x " * 1995 + secret + " tail")
    assert truncated
    assert len(text) == TEXT_CHARS
    # cut first, "sk-A1b2C3d" would be too short to look like a key and would leak as it is
    assert "A1b2C3d" not in text
    assert text.endswith("sk-A1b…d4E")


def test_redacting_only_the_head_of_a_long_text_shows_what_redacting_all_of_it_would() -> None:
    secret = "ghp_" + "A1b2C3d4E5" * 4
    text = ("prose " * 660 + f"GITHUB_TOKEN={secret} ") * 20  # 80 KB, a token every 4 KB
    capped, truncated = cap_text(text)
    assert truncated
    assert capped == redact(text)[:TEXT_CHARS]
    assert "A1b2C3d4E5A1" not in capped


def test_a_head_shrunk_by_many_masks_falls_back_to_redacting_everything() -> None:
    secret = "sk-" + "A1b2C3d4E5" * 30  # 303 characters masked to 11
    text = " ".join([secret] * 60 + ["tail"] * 5000)
    capped, truncated = cap_text(text)
    assert truncated
    assert capped == redact(text)[:TEXT_CHARS]
    assert "A1b2C3d4E5A1" not in capped


def test_a_message_is_redacted_and_marked_when_capped() -> None:
    message = to_message(stored(1, "Authorization: Bearer " + "abcdefghij" * 3 + " " + "y" * 5000))
    assert message.truncated
    assert len(message.text) == TEXT_CHARS
    assert "abcdefghijabcdefghij" not in message.text
    assert message.text.startswith("Authorization: Bearer abcdef…ghij ")
    short = to_message(stored(2, "password=hunter2", sender="Bob"))
    assert (short.text, short.truncated, short.sender_name) == ("password=***", False, "Bob")


def test_the_omission_marker_gives_the_size_in_kilobytes() -> None:
    assert omitted_marker(123 * 1024) == "[message omitted: 123 KB over the response limit]"
    assert omitted_marker(1) == "[message omitted: 1 KB over the response limit]"


# --- the byte budget -----------------------------------------------------------------------------


def message(position: int, text: str) -> HistoryMessage:
    return to_message(stored(position, text), text_chars=100_000)


def test_rows_that_fit_are_all_kept() -> None:
    rows = [message(3, "c"), message(2, "b"), message(1, "a")]
    fitted = fit_to_budget(rows, budget=10_000)
    assert fitted.kept == rows
    assert not fitted.deferred


def test_when_the_budget_runs_out_the_newest_rows_stay_and_older_ones_wait() -> None:
    rows = [message(p, "x" * 1000) for p in (5, 4, 3, 2, 1)]
    fitted = fit_to_budget(rows, budget=3 * 1300)
    assert [m.position for m in fitted.kept] == [5, 4, 3]
    assert fitted.deferred


def test_a_row_too_big_for_any_page_keeps_its_place_as_a_marker() -> None:
    rows = [message(3, "small"), message(2, "z" * 20_000), message(1, "small too")]
    fitted = fit_to_budget(rows, budget=8_000)
    assert [m.position for m in fitted.kept] == [3, 2, 1]
    big = fitted.kept[1]
    assert big.truncated
    assert big.text == "[message omitted: 20 KB over the response limit]"
    assert not fitted.deferred


# --- pages ---------------------------------------------------------------------------------------


def test_a_page_lists_the_newest_messages_oldest_first_and_says_where_to_go_on() -> None:
    window = [stored(p, f"line {p}") for p in range(1, 11)]
    page, _ = build_page(request(limit=4), newest_first(window, 5, 0))
    assert [m.position for m in page.messages] == [7, 8, 9, 10]
    assert (page.has_more, page.next_offset, page.truncated) == (True, 4, False)
    last, _ = build_page(request(limit=4, offset=8), newest_first(window, 5, 8))
    assert [m.position for m in last.messages] == [1, 2]
    assert (last.has_more, last.next_offset) == (False, None)


def test_bytes_is_the_exact_size_of_the_body() -> None:
    window = [stored(p, "下周二我去上海" * p) for p in range(1, 30)]
    page, body = build_page(request(), newest_first(window, 51, 0))
    assert page.bytes == len(body)
    assert json.loads(body)["bytes"] == len(body)
    assert json.loads(body) == page.model_dump(mode="json")


def test_bytes_stays_exact_where_the_size_gains_a_digit() -> None:
    sizes = set()
    wide = PageRequest("agent:main:main", SESSION_ID, WINDOW, 50, 0, text_chars=20_000)
    empty = len(build_page(wide, [stored(1, "")])[1])
    for length in [*range(1000 - empty - 75, 1000 - empty + 75), *range(10_000 - empty - 75, 10_000 - empty + 75)]:
        page, body = build_page(wide, [stored(1, "y" * length)])
        assert page.bytes == len(body)
        assert json.loads(body) == page.model_dump(mode="json")
        sizes.add(len(str(len(body))))
    assert sizes == {3, 4, 5}  # 999 → 1000 and 9999 → 10000 bytes crossed


def test_a_page_never_exceeds_the_response_limit() -> None:
    window = [stored(p, "上海" * 3000) for p in range(1, 60)]
    page, body = build_page(request(), newest_first(window, 51, 0))
    assert len(body) <= RESPONSE_BYTES
    assert page.truncated
    assert page.has_more
    assert page.next_offset == len(page.messages)
    assert all(m.truncated and len(m.text) == TEXT_CHARS for m in page.messages)


@pytest.mark.parametrize("limit", [1, 7, 50, 200])
def test_paging_back_returns_every_message_exactly_once(limit: int) -> None:
    # Mixed sizes, so the byte budget cuts some pages short and the offsets must follow what was kept.
    window = [stored(p, ("word " * (p % 13) * 150) or "short") for p in range(1, 301)]
    seen: list[int] = []
    offset: int | None = 0
    while offset is not None:
        page, body = build_page(request(limit=limit, offset=offset), newest_first(window, limit + 1, offset))
        assert len(body) <= RESPONSE_BYTES
        assert page.messages, "a page with more to come is never empty"
        seen = [m.position for m in page.messages] + seen
        offset = page.next_offset
    assert seen == list(range(1, 301))


def test_an_empty_window_is_an_empty_page() -> None:
    page, body = build_page(request(), [])
    assert (page.messages, page.has_more, page.next_offset, page.truncated) == ([], False, None, False)
    assert page.bytes == len(body)


# --- the listing cursor --------------------------------------------------------------------------


def test_a_cursor_round_trips_to_the_microsecond() -> None:
    cursor = Cursor(datetime(2026, 11, 29, 9, 30, 0, 123456, tzinfo=UTC), "agent:main:slack:group:上海")
    token = encode_cursor(cursor)
    assert "=" not in token
    assert decode_cursor(token) == cursor


def _b64(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode()


@pytest.mark.parametrize(
    "token",
    [
        "not a cursor!",
        "%%%",
        _b64("not json"),
        _b64('{"updated_at": 1}'),
        _b64('["2026-11-29T09:30:00+00:00"]'),
        _b64('["yesterday", "agent:main:main"]'),
        _b64('["2026-11-29T09:30:00", "agent:main:main"]'),
        _b64('["2026-11-29T09:30:00+00:00", 7]'),
        _b64('["0001-01-01T00:00:00+01:00", "agent:main:main"]'),  # before year 1 in UTC: a 500 once
        _b64('["2026-11-29T09:30:00+00:00", "agent:main:\\u0000"]'),  # NUL: Postgres text cannot hold it
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    ],
)
def test_a_cursor_not_handed_out_is_refused(token: str) -> None:
    with pytest.raises(BadCursor):
        decode_cursor(token)
