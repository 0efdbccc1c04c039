"""Reading the model's answer into fact candidates (consolidation.extraction_reply), and which turns extraction
reads (extraction_turns): pure, no model and no Redis."""

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from cairn.consolidation.extraction_reply import TOOL_NAME, Read, Unreadable, messages_for, read_reply
from cairn.consolidation.extraction_turns import Turn, extractable, turn_of
from cairn.events import TranscriptAppended
from cairn.events.routing import incognito_thread_key
from cairn.llm import ChatResult, ToolCall, Usage

CST = timezone(timedelta(hours=8))
SUNDAY = datetime(2026, 12, 6, 10, 0, tzinfo=CST)


def turn(n: int, text: str, role: str = "user", chat_type: str = "direct", at: datetime = SUNDAY) -> Turn:
    return Turn(f"m{n}", n, role, text, at, "agent:main:main", "s1", chat_type, sender_name="Ann")


TURNS = [turn(1, "我不吃辣了"), turn(2, "好的，记住了", role="assistant"), turn(3, "下周二我去上海")]


def item(**fields: Any) -> dict[str, Any]:
    base = {"kind": "preference", "text": "User no longer eats spicy food", "entity": "User", "relation": "Diet",
            "importance": 0.8, "original": "我不吃辣了", "turns": [1], "correction": True}  # fmt: skip
    return {**base, **fields}


def called(*items: Any, arguments: Any = None) -> ChatResult:
    args = {"memories": list(items)} if arguments is None else arguments
    return ChatResult(None, (ToolCall("c1", TOOL_NAME, args),), Usage(10, 5), "stop", "m")


def said(content: str) -> ChatResult:
    return ChatResult(content, (), Usage(10, 5), "stop", "m")


def read(reply: ChatResult, gate: float = 0.5) -> Read:
    found = read_reply(reply, TURNS, gate)
    assert isinstance(found, Read), found
    return found


def test_a_tool_call_becomes_candidates_with_provenance() -> None:
    [found] = read(called(item())).candidates
    assert (found.kind, found.entity, found.relation, found.correction) == ("preference", "user", "diet", True)
    assert found.provenance.message_ids == ("m1",)
    assert found.provenance.origin == "owner"
    assert (found.valid_from, found.valid_until) == (SUNDAY, None)  # no date named: from when it was said


@pytest.mark.parametrize(
    "content",
    [
        json.dumps({"memories": [item()]}, ensure_ascii=False),
        json.dumps([item()], ensure_ascii=False),
        "Here you go:\n```json\n" + json.dumps([item()], ensure_ascii=False) + "\n```",
    ],
    ids=["object", "list", "fenced"],
)
def test_json_in_the_text_is_read_too(content: str) -> None:
    assert len(read(said(content)).candidates) == 1


@pytest.mark.parametrize(
    "reply",
    [
        said("Sure! {kind: plan"),
        said(""),
        said('{"facts": []}'),
        said("42"),
        called(arguments={"memories": "none"}),
        called(arguments={}),
    ],
    ids=["broken-json", "empty", "no-memories", "a-number", "memories-not-a-list", "no-arguments"],
)
def test_an_unreadable_reply_is_unreadable_never_an_exception(reply: ChatResult) -> None:
    assert isinstance(read_reply(reply, TURNS, 0.5), Unreadable)


def test_items_that_are_no_memory_are_dropped_and_counted() -> None:
    bad = [
        "a string", item(kind="opinion"), item(text=""), item(importance="high"), item(importance=True),
        {"kind": "plan"}, None,
    ]  # fmt: skip
    found = read(called(*bad, item()))
    assert (len(found.candidates), found.dropped) == (1, len(bad))


def test_the_importance_gate_and_clamping() -> None:
    found = read(called(item(importance=0.49), item(importance=7), item(importance=-1)), gate=0.5).candidates
    assert [c.importance for c in found] == [1.0]


def test_a_plans_relative_date_is_resolved_against_its_own_turn() -> None:
    earlier = [turn(1, "hi", at=SUNDAY - timedelta(days=3)), turn(2, "下周二我去上海")]
    reply = called(item(kind="plan", original="下周二我去上海", turns=[2], correction=False))
    found = read_reply(reply, earlier, 0.5)
    assert isinstance(found, Read)
    [plan] = found.candidates
    assert (plan.valid_from, plan.valid_until) == (datetime(2026, 12, 8, tzinfo=CST), datetime(2026, 12, 9, tzinfo=CST))


def test_a_profile_fact_holds_from_the_date_it_names_on() -> None:
    reply = called(item(kind="profile", original="I moved to Berlin last month", turns=[1]))
    [fact] = read(reply).candidates
    assert (fact.valid_from, fact.valid_until) == (datetime(2026, 11, 1, tzinfo=CST), None)


def test_unknown_turn_numbers_cite_the_whole_batch() -> None:
    [found] = read(called(item(turns=[0, 9, "2", True]))).candidates
    assert found.provenance.message_ids == ("m1", "m2", "m3")


def test_a_group_members_words_are_untrusted_and_the_assistants_the_agents() -> None:
    turns = [turn(1, "I am the admin", chat_type="group"), turn(2, "ok", role="assistant")]
    group = read_reply(called(item(turns=[1, 2])), turns, 0.5)
    agent = read_reply(called(item(turns=[2])), turns, 0.5)
    assert isinstance(group, Read)
    assert isinstance(agent, Read)
    assert group.candidates[0].provenance.origin == "untrusted"
    assert agent.candidates[0].provenance.origin == "agent"
    assert "group member Ann: I am the admin" in messages_for(turns)[-1]["content"]


def entry(text: str = "hello", **fields: Any) -> TranscriptAppended:
    base: dict[str, Any] = {"tenant_id": "0190f3f0-0000-7000-8000-000000000001", "session_key": "agent:main:main",
        "session_id": "s", "position": 1, "reset_index": 0, "message_id": "m", "role": "user", "text": text,
        "channel": "web", "chat_type": "direct", "token_estimate": 1}  # fmt: skip
    return TranscriptAppended(**{**base, **fields})


@pytest.mark.parametrize(
    ("event", "read_it"),
    [
        (entry(), True),
        (entry(role="assistant"), True),
        (entry(session_key="agent:main:slack:group:g", chat_type="group"), True),
        (entry(role="tool"), False),
        (entry("   "), False),
        (entry("/new"), False),
        (entry(session_key=incognito_thread_key("main")), False),
        (entry(session_key="cron:nightly"), False),
        (entry(channel="heartbeat"), False),
        (entry(session_key="hook:deploy"), False),
        (entry(session_key="agent:main:subagent:1"), False),
    ],
    ids=["user", "assistant", "group", "tool", "blank", "command", "incognito", "cron", "heartbeat", "hook", "sub"],
)
def test_which_turns_are_read(event: TranscriptAppended, read_it: bool) -> None:
    assert extractable(event) is read_it


def test_a_turn_is_kept_redacted_and_cut() -> None:
    kept = turn_of(entry("my key is sk-proj-abcdefghijklmnopqrstuvwxyz0123456789 ok " + "x" * 5000), max_chars=200)
    assert "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789" not in kept.text
    assert kept.text.startswith("my key is ")
    assert len(kept.text) <= 200
    assert Turn.loads(kept.dumps()) == kept
