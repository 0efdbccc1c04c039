"""The pre-compaction memory flush end to end (issue 30): the services as processes, messages and compaction
reports through the public API, the model a real HTTP server speaking the chat-completions protocol
(`tests/model_api.py`) that each tenant here reaches through its model override. What peers get wrong, shown
not to happen: a flush skipped every other cycle, missed on the overflow path or on a compaction the runtime
forced, changed by a compaction racing it, lost while consolidation or the model is down; writes outside the
day's note refused; cron, heartbeat and incognito never flushed; no model: pending, never faked."""

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

import asyncpg
import httpx
import pytest

from cairn.consolidation.flush import TOOL as FLUSH_TOOL
from cairn.local import LocalStack
from tests.conftest import Tenant
from tests.model_api import CallTools, Hang, ModelServer, Received, Status

pytestmark = pytest.mark.e2e

KEY = "agent:main:main"
TOOL = "append_daily_note"
NOTE = CallTools((TOOL, {"text": "- kept before compaction"}))
# The test stack's threshold is 200 tokens (context window 2000): four of these (~60 tokens each) cross it.
FILLER = "We compared three vendors on price, support hours and data residency, and chose the second. " * 2
T = TypeVar("T")


@pytest.fixture(scope="module")
def model_server() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


def _eventually(check: Callable[[], T], within: float = 60.0, what: str = "") -> T:
    """`check()` once it is truthy, asked every 0.1 s for at most `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"not within {within:g} s: {what}"
        time.sleep(0.1)


async def _rows(stack: LocalStack, sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


def flushes(stack: LocalStack, tenant: Tenant) -> list[asyncpg.Record]:
    return asyncio.run(_rows(
        stack,
        "SELECT session_key, reset_index, cycle, forced, up_to_position, done_at, attempts, failures, last_error,"
        " refused, daily_path FROM consolidation.flushes_due WHERE tenant_id = $1 ORDER BY reset_index, cycle",
        tenant.tenant_id,
    ))  # fmt: skip


def use_model(stack: LocalStack, tenant: Tenant, server: ModelServer) -> None:
    admin = {"Authorization": f"Bearer {stack.state.admin_token}"}
    put = httpx.put(
        f"{stack.url('ingest')}/v1/admin/tenants/{tenant.tenant_id}/llm",
        json={"base_url": server.url, "model": "test-model"},
        headers=admin,
        timeout=10,
    )
    assert put.status_code == 200, put.text


def today_note() -> str:
    return f"memory/daily/{datetime.now(UTC):%Y-%m-%d}.md"


def note_text(tenant: Tenant) -> str:
    got = tenant.recall.get(f"/v1/memory/files/{today_note()}")
    return str(got.json()["text"]) if got.status_code == 200 else ""


def metadata(tenant: Tenant, key: str = KEY) -> dict[str, Any]:
    got = tenant.recall.get(f"/v1/sessions/{key}")
    assert got.status_code == 200, got.text
    body: dict[str, Any] = got.json()
    return body


def flush_requests(server: ModelServer, marker: str) -> list[Received]:
    """The flush turns the server was sent that carry `marker` (each test's words are its own); extraction's calls,
    which read the same turns with a tool of their own, are not flush turns."""
    return [r for r in list(server.requests) if _offers(r, FLUSH_TOOL) and marker in str(r.messages)]


def _offers(request: Received, tool: str) -> bool:
    return any(t.get("function", {}).get("name") == tool for t in request.tools or [])


def compact(tenant: Tenant, first_kept: str, key: str = KEY) -> None:
    report = tenant.ingest.post(f"/v1/sessions/{key}/compaction", json={"first_kept_message_id": first_kept})
    assert report.status_code == 202, report.text


def is_due(stack: LocalStack, tenant: Tenant, cycle: int) -> bool:
    return cycle in {row["cycle"] for row in flushes(stack, tenant)}


def note_with(tenant: Tenant, blocks: int) -> str:
    """Today's note once it holds `blocks` flushes' notes, else ""."""
    text = note_text(tenant)
    return text if text.count("## Notes before compaction") == blocks else ""


def test_no_model_leaves_the_flush_pending_and_says_so(services: LocalStack, tenant: Tenant) -> None:
    for i in range(5):
        tenant.say(f"{FILLER} nomodel {i}", message_id=f"n{i}")
    [row] = _eventually(lambda: [r for r in flushes(services, tenant) if r["last_error"]], what="no-model mark")
    assert row["done_at"] is None
    assert row["attempts"] == 0  # no model turn was faked
    flush = metadata(tenant)["memory_flush"]
    assert flush["pending"] is True
    assert flush["pending_cycle"] == 0
    assert flush["cycle"] is None
    assert "no model" in flush["last_error"]
    assert note_text(tenant) == ""
    status = tenant.recall.get("/v1/memory/status").json()
    assert status["pending"]["flushes"] == 1
    assert any("model" in fallback for fallback in status["fallbacks"])


def test_one_flush_per_cycle_over_ten_cycles_with_overflow_forced_and_racing_compactions(
    services: LocalStack, tenant: Tenant, model_server: ModelServer
) -> None:
    use_model(services, tenant, model_server)
    model_server.script(then=NOTE)
    # cycle → the marker of every message that cycle's flush must read, and only it
    words = {cycle: f"c{cycle}x{uuid.uuid4().hex[:6]}" for cycle in range(10)}
    for cycle, marker in words.items():
        if cycle == 3:  # the model goes down: cycle 3's flush fails, and waits
            model_server.script(then=Status(503, "model loading"))
        if cycle == 6:  # the runtime compacts before cairn's estimate crossed (an overflow it saw, a command)
            last = tenant.say(f"{marker} short", message_id=f"{marker}-only")
            tenant.search("vendors", consistent_with=last["position"])  # stored: the report can name it
            compact(tenant, f"{marker}-only")
            continue
        # one message crosses the threshold (~240 tokens); cycle 2's overflows the whole context window
        size = 50 if cycle == 2 else 5
        tenant.say(f"{marker} {FILLER * size}", message_id=f"{marker}-big")
        _eventually(partial(is_due, services, tenant, cycle), what=f"cycle {cycle} due")
        kept = f"{marker}-big"
        if cycle == 5:  # said after cycle 5's boundary, so cycle 6's; the compaction keeps only it
            last = tenant.say(f"{words[6]} ok", message_id=f"{words[6]}-small")
            tenant.search("vendors", consistent_with=last["position"])
            kept = f"{words[6]}-small"
        if cycle == 3:  # cycle 3's flush has failed at least once: compact and go on while it waits
            _eventually(partial(flush_requests, model_server, marker), what="cycle 3's failed turn")
        compact(tenant, kept)
        if cycle == 4:  # cycles 3 and 4 are due and the model is down; it comes back
            assert [r["done_at"] for r in flushes(services, tenant) if r["cycle"] == 3] == [None]
            model_server.script(then=NOTE)
    _eventually(lambda: len([r for r in flushes(services, tenant) if r["done_at"]]) == 10, what="10 flushes done")

    rows = flushes(services, tenant)
    assert [(r["reset_index"], r["cycle"]) for r in rows] == [(0, c) for c in range(10)]
    assert [r["forced"] for r in rows] == [c == 6 for c in range(10)]
    assert rows[3]["failures"] >= 1
    assert rows[3]["attempts"] == rows[3]["failures"] + 1
    # each cycle's turn read its own messages, and only them: the compaction racing cycle 3's flush and the
    # messages of cycle 4 that came meanwhile changed nothing it read
    for cycle, marker in words.items():
        turns = flush_requests(model_server, marker)
        assert turns, f"cycle {cycle} was never flushed"
        others = [m for c, m in words.items() if c != cycle]
        assert not any(m in str(r.messages) for r in turns for m in others), f"cycle {cycle} read another's words"
    answered = [r for m in words.values() for r in flush_requests(model_server, m)]
    # one answered turn per cycle; every other turn is a failure while the model was down, counted as one
    assert len(answered) == 10 + sum(r["failures"] for r in rows)
    assert all(r["attempts"] == r["failures"] + 1 for r in rows)
    # the notes: exactly one block per cycle, appended to today's note
    text = _eventually(partial(note_with, tenant, 10), what="10 blocks of notes")
    for cycle in range(10):
        assert text.count(f", {KEY}, cycle {cycle})") == 1
    flush = metadata(tenant)["memory_flush"]
    assert (flush["cycle"], flush["pending"], flush["daily_path"]) == (9, False, today_note())
    assert flush["last_at"] is not None
    # every turn is counted for the tenant under its purpose: ten answered (20 + 5 tokens each), the rest failed
    usage = httpx.get(
        f"{services.url('ingest')}/v1/admin/tenants/{tenant.tenant_id}/usage",
        headers={"Authorization": f"Bearer {services.state.admin_token}"},
        timeout=10,
    ).json()
    [line] = [line for line in usage["days"] if line["purpose"] == "memory-flush"]
    failed = sum(r["failures"] for r in rows)
    assert (line["calls"], line["failures"]) == (10 + failed, failed)
    assert (line["prompt_tokens"], line["completion_tokens"]) == (200, 50)


def test_a_write_outside_the_daily_note_is_refused(
    services: LocalStack, tenant: Tenant, model_server: ModelServer
) -> None:
    pinned = tenant.ingest.put("/v1/memory/files/MEMORY.md", json={"text": "# Pinned\n- original\n"})
    assert pinned.status_code in (200, 201), pinned.text
    use_model(services, tenant, model_server)
    model_server.script(
        then=CallTools(
            (TOOL, {"text": "- overwritten", "path": "MEMORY.md"}),
            ("write_file", {"path": "memory/bank/profile.md", "text": "- planted"}),
            (TOOL, {"text": "- the user's sister is called Ana"}),
        )
    )
    for i in range(5):
        tenant.say(f"{FILLER} refuse {i}", message_id=f"r{i}")
    [row] = _eventually(lambda: [r for r in flushes(services, tenant) if r["done_at"]], what="flush done")
    assert row["refused"] == 2
    assert "MEMORY.md" in row["last_error"]
    text = _eventually(partial(note_with, tenant, 1), what="the day's note")
    assert "sister is called Ana" in text
    assert "overwritten" not in text
    assert "planted" not in text
    assert tenant.recall.get("/v1/memory/files/MEMORY.md").json()["text"] == "# Pinned\n- original\n"
    assert tenant.recall.get("/v1/memory/files/memory/bank/profile.md").status_code == 404
    assert metadata(tenant)["memory_flush"]["refused"] == 2


def test_cron_heartbeat_and_incognito_are_never_flushed(
    services: LocalStack, tenant: Tenant, model_server: ModelServer
) -> None:
    use_model(services, tenant, model_server)
    model_server.script(then=NOTE)
    marker = uuid.uuid4().hex[:8]
    for i in range(6):
        tenant.say(f"{FILLER} cronjob{marker} {i}", session_key="cron:nightly", channel="cron", message_id=f"cr{i}")
        tenant.say(f"{FILLER} heartbeat{marker} {i}", channel="heartbeat", message_id=f"hb{i}")
    created = tenant.ingest.post("/v1/sessions", json={"incognito": True})
    assert created.status_code == 201, created.text
    thread = created.json()["session_key"]
    for i in range(6):
        tenant.say(f"{FILLER} secret{marker} {i}", session_key=thread, message_id=f"in{i}")
    for i in range(5):  # the control: a conversation that does cross, after all of the above
        last = tenant.say(f"{FILLER} talk{marker} {i}", message_id=f"t{i}")
    tenant.search("vendors", consistent_with=last["position"])
    [row] = _eventually(lambda: [r for r in flushes(services, tenant) if r["done_at"]], what="the control's flush")
    assert row["session_key"] == KEY
    assert len(flushes(services, tenant)) == 1
    [turn] = flush_requests(model_server, f"talk{marker}")
    for never in (f"cronjob{marker}", f"heartbeat{marker}", f"secret{marker}"):
        assert never not in str(turn.messages)
        assert flush_requests(model_server, never) == []


def test_no_flush_is_lost_when_consolidation_is_killed_mid_flush(
    services: LocalStack, tenant: Tenant, model_server: ModelServer
) -> None:
    use_model(services, tenant, model_server)
    model_server.script(then=Hang())
    marker = f"kill{uuid.uuid4().hex[:8]}"
    for i in range(5):
        tenant.say(f"{marker} {FILLER}", message_id=f"k{i}")
    _eventually(lambda: flush_requests(model_server, marker), what="the flush's turn under way")
    services.kill_service("consolidation")  # mid-flush: the model has not answered
    model_server.script(then=NOTE)
    services.start_service("consolidation")
    services.wait_ready("consolidation")
    [row] = _eventually(lambda: [r for r in flushes(services, tenant) if r["done_at"]], what="flush done after")
    assert row["attempts"] == 1  # the killed turn never committed; the one after did, once
    _eventually(partial(note_with, tenant, 1), what="the day's note")
    assert len(flush_requests(model_server, marker)) == 2


def test_the_window_after_a_reset_gets_its_own_flush(
    services: LocalStack, tenant: Tenant, model_server: ModelServer
) -> None:
    """A reset keeps the session's cycle count: the next window's cycle 0 is still a flush of its own."""
    use_model(services, tenant, model_server)
    model_server.script(then=NOTE)
    before, after = f"before{uuid.uuid4().hex[:8]}", f"after{uuid.uuid4().hex[:8]}"
    tenant.say(f"{before} {FILLER * 5}", message_id="w0")
    _eventually(partial(is_due, services, tenant, 0), what="the first window's flush due")
    tenant.say("/new", message_id="w-new")
    tenant.say(f"{after} {FILLER * 5}", message_id="w1")
    _eventually(lambda: len([r for r in flushes(services, tenant) if r["done_at"]]) == 2, what="two flushes done")
    assert [(r["reset_index"], r["cycle"]) for r in flushes(services, tenant)] == [(0, 0), (1, 0)]
    [first] = flush_requests(model_server, before)
    [second] = flush_requests(model_server, after)
    assert after not in str(first.messages)
    assert before not in str(second.messages)
    _eventually(partial(note_with, tenant, 2), what="two blocks of notes")
