"""The pre-compaction flush's pure rules: which sessions flush, what the turn reads, which of the model's calls
write and which are refused, the day's note in the agent's time zone, one write id per cycle."""

from datetime import UTC, datetime

from cairn.consolidation.flush import (
    MAX_NOTE_CHARS,
    TOOL,
    Line,
    call_refusal,
    daily_note_path,
    flushes,
    plan_flush,
    prompt,
    tool_spec,
    window_text,
    write_id,
)
from cairn.events import MemoryWriteRequested
from cairn.llm import ToolCall

DAILY = "memory/daily/2026-11-29.md"
TENANT = "0b5e8f9a-3c1d-4e2f-8a6b-7c9d0e1f2a3b"
AT = datetime(2026, 11, 29, 9, 30, tzinfo=UTC)


def _call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=dict(arguments))


def test_cron_and_incognito_sessions_never_flush() -> None:
    assert flushes("agent:main:main")
    assert flushes("agent:main:telegram:direct:42")
    assert not flushes("cron:nightly-report")
    assert not flushes("agent:main:dashboard:incognito-5b0d3c1e")


def test_the_window_keeps_user_and_assistant_words_newest_last_and_drops_commands_and_tools() -> None:
    lines = [
        Line("user", "I moved to Porto\nlast week", AT),
        Line("tool", "weather: sunny", AT),
        Line("user", "/status", AT),
        Line("assistant", "Noted: Porto.", AT),
    ]
    assert window_text(lines) == (
        "[2026-11-29 09:30 UTC] User: I moved to Porto last week\n[2026-11-29 09:30 UTC] Assistant: Noted: Porto."
    )
    long = [Line("user", f"message {i} " + "x" * 80, AT) for i in range(100)]
    kept = window_text(long, limit=1000)
    assert len(kept) <= 1000
    assert kept.endswith("message 99 " + "x" * 80)
    assert "message 0 " not in kept


def test_only_the_day_note_tool_writes_and_memory_md_or_the_bank_are_refused() -> None:
    assert call_refusal(_call(TOOL, text="- likes tea"), DAILY) is None
    assert call_refusal(_call(TOOL, text="- likes tea", path=DAILY), DAILY) is None
    memory_md = call_refusal(_call(TOOL, text="- x", path="MEMORY.md"), DAILY)
    assert memory_md is not None
    assert "MEMORY.md" in memory_md
    assert "read-only" in memory_md
    other_tool = call_refusal(_call("write_file", path="memory/bank/profile.md", text="- x"), DAILY)
    assert other_tool is not None
    assert other_tool.startswith("write_file to memory/bank/profile.md: refused")
    assert call_refusal(_call(TOOL, text="  "), DAILY) is not None


def test_the_plan_writes_the_valid_notes_under_one_heading_and_counts_each_refusal() -> None:
    calls = [
        _call(TOOL, text="- flight to Lisbon on 3 Dec"),
        _call("write_file", path="MEMORY.md", text="- overwrite everything"),
        _call(TOOL, text="- prefers aisle seats", path="memory/bank/preferences.md"),
        _call(TOOL, text="- sister is called Ana"),
    ]
    plan = plan_flush(calls, DAILY, "## Notes")
    assert plan.text == "## Notes\n\n- flight to Lisbon on 3 Dec\n- sister is called Ana\n"
    assert len(plan.refused) == 2
    assert "overwrite everything" not in plan.text
    assert plan_flush([], DAILY, "## Notes").text == ""  # nothing worth keeping: nothing written
    odd = plan_flush([_call(TOOL, text="- tab\tkept\x00, bell\x07 and \ud800 dropped\x9f")], DAILY, "## N")
    assert odd.text == "## N\n\n- tab\tkept, bell and  dropped\n"
    assert MemoryWriteRequested(tenant_id=TENANT, path=DAILY, mode="append", text=odd.text)  # writable
    huge = plan_flush([_call(TOOL, text="y" * (MAX_NOTE_CHARS * 2))], DAILY, "## N")
    assert len(huge.text) <= MAX_NOTE_CHARS + len("## N\n\n\n")


def test_the_day_note_is_named_in_the_agents_time_zone() -> None:
    late = datetime(2026, 11, 29, 23, 30, tzinfo=UTC)
    assert daily_note_path(late, None) == "memory/daily/2026-11-29.md"
    assert daily_note_path(late, "Asia/Shanghai") == "memory/daily/2026-11-30.md"
    assert daily_note_path(late, "Not/AZone") == "memory/daily/2026-11-29.md"


def test_the_turn_is_told_what_is_read_only_and_given_one_tool() -> None:
    system = prompt("[..] User: hi", DAILY)[0]["content"]
    assert "MEMORY.md" in system
    assert "read-only" in system
    assert DAILY in system
    assert [t["function"]["name"] for t in tool_spec(DAILY)] == [TOOL]


def test_one_write_id_per_cycle() -> None:
    tenant, session = "0b5e8f9a-3c1d-4e2f-8a6b-7c9d0e1f2a3b", "5f0c2d3e-4b5a-4c6d-9e8f-0a1b2c3d4e5f"
    assert write_id(tenant, session, 0, 3) == write_id(tenant, session, 0, 3)
    assert len({write_id(tenant, session, r, c) for r in range(3) for c in range(3)}) == 9
