"""What recall searches with, pure: the message and, by query mode, the turns before it."""

from cairn.recall.recall_query import RecallQuery, Turn, build_query


def _newest_first(*turns: tuple[str, str]) -> list[Turn]:
    return [Turn(role, text) for role, text in reversed(turns)]


HISTORY = _newest_first(
    ("user", "first question"),
    ("assistant", "first answer"),
    ("user", "we talked about the logo"),
    ("assistant", "yes, the blue one"),
    ("user", "and the font?"),
    ("assistant", "Inter, you said"),
)


def test_message_mode_searches_the_message_only() -> None:
    query = build_query("message", "what did we decide?", HISTORY)
    assert query == RecallQuery("what did we decide?", ())
    assert query.search_text == "what did we decide?"


def test_recent_mode_adds_the_last_two_user_turns_and_the_last_assistant_turn_oldest_first() -> None:
    query = build_query("recent", "what did we decide?", HISTORY)
    assert query.context == (
        Turn("user", "we talked about the logo"),
        Turn("user", "and the font?"),
        Turn("assistant", "Inter, you said"),
    )
    assert query.search_text == "we talked about the logo\nand the font?\nInter, you said\nwhat did we decide?"


def test_recent_mode_leaves_out_the_message_itself_when_it_is_already_stored() -> None:
    stored = [Turn("user", "what did we decide?"), *HISTORY]
    assert build_query("recent", "what did we decide?", stored) == build_query("recent", "what did we decide?", HISTORY)


def test_recent_turns_are_cut_to_220_and_180_characters() -> None:
    long_user, long_assistant = "u" * 500, "word " * 100
    query = build_query("recent", "m", _newest_first(("user", long_user), ("assistant", long_assistant)))
    user, assistant = query.context
    assert len(user.text) == 220
    assert len(assistant.text) <= 180
    assert assistant.text.startswith("word word")


def test_a_new_session_has_no_context() -> None:
    assert build_query("recent", "我下周有什么安排？", []).search_text == "我下周有什么安排？"


def test_full_mode_takes_the_window_newest_first_within_a_budget() -> None:
    many = _newest_first(*[("user" if i % 2 == 0 else "assistant", f"turn {i} " + "x" * 300) for i in range(40)])
    query = build_query("full", "now", many)
    assert 0 < len(query.context) < 40
    assert sum(len(t.text) for t in query.context) + len("now") <= 4000
    assert query.context[-1].text.startswith("turn 39")  # the newest turn is kept, oldest first in order
    texts = [t.text for t in query.context]
    assert texts == sorted(texts, key=lambda t: int(t.split()[1]))


def test_the_prompt_says_who_said_what() -> None:
    query = build_query("recent", "and then?", _newest_first(("user", "hi"), ("assistant", "hello")))
    assert query.prompt_text() == "Recent conversation:\nuser: hi\nassistant: hello\n\nLatest user message: and then?"
    assert build_query("message", "hi", []).prompt_text() == "hi"


def test_a_long_message_is_searched_by_its_first_2000_characters() -> None:
    pasted = "lorem ipsum " * 1000
    query = build_query("message", pasted, [])
    assert len(query.message) <= 2000
    assert pasted.startswith(query.message[:-1])
    recent = build_query("recent", pasted, [Turn("user", pasted), Turn("user", "before")])
    assert recent.context == (Turn("user", "before"),)  # the stored copy of the long message is still left out
