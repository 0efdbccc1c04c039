"""Memory documents through the public API: writes at ingest (versions, If-Match, daily notes, deletes,
limits), reads at recall (windows, earlier versions, listings), one `memory.document-changed` per change,
tenants kept apart, and concurrent writers neither lost nor applied twice."""

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import nats
import pytest

from cairn.events import (
    DEAD_LETTER_STREAM,
    INGEST_STREAM,
    MEMORY_STREAM,
    DocumentChanged,
    MemoryWriteRequested,
    decode_event,
    encode_event,
    subject_for,
)
from cairn.events.documents import MAX_DOCUMENT_BYTES
from cairn.local import LocalStack
from tests.conftest import Tenant
from tests.streams import stream_messages

pytestmark = pytest.mark.e2e


def put(tenant: Tenant, path: str, text: str, if_match: str | None = None, **body: Any) -> httpx.Response:
    headers = {"If-Match": if_match} if if_match is not None else {}
    return tenant.ingest.put(f"/v1/memory/files/{path}", json={"text": text, **body}, headers=headers)


def read(tenant: Tenant, path: str, **params: Any) -> httpx.Response:
    return tenant.recall.get(f"/v1/memory/files/{path}", params=params)


def written(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["pending"] is False
    assert response.headers["ETag"] == f'"{body["version"]}"'
    return body


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    return body


async def _stream(stack: LocalStack, stream: str, subject: str) -> list[Any]:
    nc = await nats.connect(stack.nats_url)
    try:
        return await stream_messages(nc.jetstream(), stream, subject)
    finally:
        await nc.close()


def document_changes(stack: LocalStack, tenant: Tenant) -> list[DocumentChanged]:
    subject = f"cairn.{tenant.tenant_id}.main.memory.document-changed"
    events = [decode_event(m.data or b"") for m in asyncio.run(_stream(stack, MEMORY_STREAM, subject))]
    return [e for e in events if isinstance(e, DocumentChanged)]


def write_requests(stack: LocalStack, tenant: Tenant) -> int:
    subject = f"cairn.{tenant.tenant_id}.*.memory.write-requested.*"
    return len(asyncio.run(_stream(stack, INGEST_STREAM, subject)))


def test_create_update_conflict_delete_and_earlier_versions(tenant: Tenant) -> None:
    created = written(put(tenant, "MEMORY.md", "# Memory\n- likes green tea\n"), 201)
    assert {k: created[k] for k in ("path", "version", "change")} == {
        "path": "MEMORY.md", "version": 1, "change": "created",
    }  # fmt: skip
    assert created["position"].isdigit()
    current = read(tenant, "MEMORY.md")
    assert current.status_code == 200, current.text
    assert (current.json()["text"], current.json()["version"], current.headers["ETag"]) == (
        "# Memory\n- likes green tea\n", 1, '"1"',
    )  # fmt: skip

    updated = written(put(tenant, "MEMORY.md", "# Memory\n- likes oolong\n", if_match='"1"'), 200)
    assert (updated["version"], updated["change"]) == (2, "updated")

    stale = problem(put(tenant, "MEMORY.md", "# Memory\n- likes coffee\n", if_match="1"), 409)
    assert stale["errors"] == [{"field": "If-Match", "message": stale["detail"]}]
    assert "is at version 2" in stale["detail"]
    assert read(tenant, "MEMORY.md").json()["text"] == "# Memory\n- likes oolong\n"

    same = written(put(tenant, "MEMORY.md", "# Memory\n- likes oolong\n", if_match="2"), 200)
    assert (same["version"], same["change"]) == (2, "unchanged")

    deleted = tenant.ingest.delete("/v1/memory/files/MEMORY.md", params={"agent_id": "main"})
    assert (written(deleted, 200)["version"], deleted.json()["change"]) == (3, "deleted")
    problem(read(tenant, "MEMORY.md"), 404)
    assert read(tenant, "MEMORY.md", version=1).json()["text"] == "# Memory\n- likes green tea\n"
    assert read(tenant, "MEMORY.md", version=2).json()["text"] == "# Memory\n- likes oolong\n"
    problem(read(tenant, "MEMORY.md", version=3), 404)  # the deletion itself has no text
    problem(read(tenant, "MEMORY.md", version=9), 404)
    history = tenant.recall.get("/v1/memory/versions/MEMORY.md").json()["versions"]
    assert [(v["version"], v["change"]) for v in history] == [(3, "deleted"), (2, "updated"), (1, "created")]
    problem(tenant.ingest.delete("/v1/memory/files/MEMORY.md"), 404)

    recreated = written(put(tenant, "MEMORY.md", "# Memory\n- new start\n", if_match="0"), 201)
    assert (recreated["version"], recreated["change"]) == (4, "created")
    problem(put(tenant, "MEMORY.md", "again", if_match="0"), 409)  # 0: only if it does not exist
    files = tenant.recall.get("/v1/memory/files").json()["files"]
    assert [(f["path"], f["version"], f["bytes"]) for f in files] == [("MEMORY.md", 4, len("# Memory\n- new start\n"))]


def test_every_change_is_one_document_changed_event_at_its_write_position(services: LocalStack, tenant: Tenant) -> None:
    positions = [
        written(put(tenant, "memory/bank/profile.md", "name: Li Wei\n"), 201)["position"],
        written(put(tenant, "memory/bank/profile.md", "name: Li Wei\ncity: Shanghai\n"), 200)["position"],
        written(tenant.ingest.delete("/v1/memory/files/memory/bank/profile.md"), 200)["position"],
    ]
    written(put(tenant, "memory/bank/profile.md", "name: Li Wei\n", if_match="0"), 201)  # deleted: version 0
    problem(put(tenant, "memory/bank/profile.md", "stale", if_match="1"), 409)  # no event for a refusal
    deadline = time.monotonic() + 10
    changes = document_changes(services, tenant)
    while len(changes) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
        changes = document_changes(services, tenant)
    assert [(c.path, c.version, c.change, c.text) for c in changes] == [
        ("memory/bank/profile.md", 1, "created", "name: Li Wei\n"),
        ("memory/bank/profile.md", 2, "updated", "name: Li Wei\ncity: Shanghai\n"),
        ("memory/bank/profile.md", 3, "deleted", ""),
        ("memory/bank/profile.md", 4, "created", "name: Li Wei\n"),
    ]
    assert [str(c.ingest_seq) for c in changes[:3]] == positions


def test_daily_notes_append_and_default_to_the_agents_day(tenant: Tenant) -> None:
    first = tenant.ingest.post("/v1/memory/daily", json={"text": "- walked to the harbour", "date": "2021-03-14"})
    assert written(first, 201)["path"] == "memory/daily/2021-03-14.md"
    second = tenant.ingest.post("/v1/memory/daily", json={"text": "- bought 上海 tickets", "date": "2021-03-14"})
    assert (written(second, 200)["version"], second.json()["change"]) == (2, "updated")
    note = read(tenant, "memory/daily/2021-03-14.md").json()
    assert note["text"] == "- walked to the harbour\n- bought 上海 tickets"

    zone = "Pacific/Kiritimati"  # UTC+14: its today is rarely the server's
    configured = tenant.ingest.put("/v1/agents/main/config", json={"reset": {"timezone": zone}})
    assert configured.status_code == 200, configured.text
    before = datetime.now(ZoneInfo(zone)).date()
    today = written(tenant.ingest.post("/v1/memory/daily", json={"text": "- note for today"}), 201)
    after = datetime.now(ZoneInfo(zone)).date()
    assert today["path"] in {f"memory/daily/{before}.md", f"memory/daily/{after}.md"}

    problem(tenant.ingest.post("/v1/memory/daily", json={"text": "", "date": "2021-03-14"}), 422)
    bad_day = problem(tenant.ingest.post("/v1/memory/daily", json={"text": "x", "date": "2026-02-30"}), 422)
    assert [e["field"] for e in bad_day["errors"]] == ["date"]


def test_a_retry_with_the_same_idempotency_key_is_applied_once(tenant: Tenant) -> None:
    body = {"text": "- only once", "date": "2026-12-01"}
    headers = {"Idempotency-Key": "flush-7"}
    first = written(tenant.ingest.post("/v1/memory/daily", json=body, headers=headers), 201)
    retry = written(tenant.ingest.post("/v1/memory/daily", json=body, headers=headers), 201)
    assert retry == first
    assert read(tenant, "memory/daily/2026-12-01.md").json()["text"] == "- only once"


def test_bad_paths_texts_and_headers_are_refused_before_anything_is_published(
    services: LocalStack, tenant: Tenant
) -> None:
    cases = [
        ("memory/%2E%2E/MEMORY.md", "x", None, 422, "path", "path must not contain '.' or '..' segments"),
        ("notes/todo.md", "x", None, 422, "path", "path must be one of MEMORY.md, memory/bank/*.md"),
        ("memory/bank/todo.txt", "x", None, 422, "path", "Markdown only: the file name must end in .md"),
        ("memory/daily/2026-02-30.md", "x", None, 422, "path", "a daily note is named memory/daily/YYYY-MM-DD.md"),
        ("MEMORY.md", "bell \x07", None, 422, "text", "must not contain a control character (U+0007) at character 6"),
        ("MEMORY.md", "x" * (MAX_DOCUMENT_BYTES + 1), None, 413, "text", f"the limit is {MAX_DOCUMENT_BYTES} bytes"),
        ("MEMORY.md", "x", "latest", 422, "If-Match", "If-Match must be a version this API gave as ETag"),
    ]
    for path, text, if_match, status, field, message in cases:
        refused = problem(put(tenant, path, text, if_match), status)
        assert [e["field"] for e in refused["errors"]] == [field], (path, refused)
        assert message in refused["errors"][0]["message"], (path, refused)
    absolute = tenant.ingest.put("/v1/memory/files//etc/passwd.md", json={"text": "x"})
    assert problem(absolute, 422)["errors"][0]["message"].startswith("path must be relative")
    assert write_requests(services, tenant) == 0
    problem(read(tenant, "MEMORY.md"), 404)


def test_a_daily_note_may_not_grow_past_the_size_limit(tenant: Tenant) -> None:
    day = "memory/daily/2026-11-29.md"
    written(put(tenant, day, "x" * (MAX_DOCUMENT_BYTES - 10)), 201)
    too_big = problem(tenant.ingest.post("/v1/memory/daily", json={"text": "y" * 20, "date": "2026-11-29"}), 413)
    assert too_big["errors"] == [{"field": "text", "message": too_big["detail"]}]
    assert f"the document would be {MAX_DOCUMENT_BYTES + 11} bytes" in too_big["detail"]
    assert read(tenant, day).json()["version"] == 1


def test_reads_come_in_windows_that_say_where_the_next_starts(tenant: Tenant) -> None:
    text = "".join(f"line {n}\n" for n in range(1, 301))
    written(put(tenant, "memory/summaries/2026-W48.md", text), 201)
    first = read(tenant, "memory/summaries/2026-W48.md").json()
    assert (first["from"], first["lines"], first["total_lines"], first["next_from"]) == (1, 120, 300, 121)
    assert first["text"] == "".join(f"line {n}\n" for n in range(1, 121))
    last = read(tenant, "memory/summaries/2026-W48.md", **{"from": 250, "lines": 100}).json()
    assert (last["lines"], last["next_from"], last["truncated"], last["notice"]) == (51, None, False, None)
    assert last["text"].startswith("line 250\n")

    wide = "".join(f"{n:03d}" + "w" * 996 + "\n" for n in range(1, 40))
    written(put(tenant, "memory/bank/wide.md", wide), 201)
    cut = read(tenant, "memory/bank/wide.md", lines=30).json()
    assert (cut["lines"], len(cut["text"]), cut["truncated"], cut["next_from"]) == (12, 12_000, True, 13)
    assert "Cut at 12000 characters" in cut["notice"]
    assert "from=13" in cut["notice"]


def test_another_tenant_sees_nothing_and_changes_nothing(tenant: Tenant, other_tenant: Tenant) -> None:
    written(put(tenant, "memory/bank/secret.md", "the vault code is 0420\n"), 201)
    problem(read(other_tenant, "memory/bank/secret.md"), 404)
    problem(read(other_tenant, "memory/bank/secret.md", version=1), 404)
    problem(other_tenant.recall.get("/v1/memory/versions/memory/bank/secret.md"), 404)
    assert other_tenant.recall.get("/v1/memory/files").json()["files"] == []
    problem(other_tenant.ingest.delete("/v1/memory/files/memory/bank/secret.md"), 404)
    problem(put(other_tenant, "memory/bank/secret.md", "overwritten", if_match="1"), 409)
    assert read(tenant, "memory/bank/secret.md").json()["text"] == "the vault code is 0420\n"
    assert read(tenant, "memory/bank/secret.md").json()["version"] == 1


def test_concurrent_writers_are_neither_lost_nor_applied_twice(tenant: Tenant) -> None:
    written(put(tenant, "memory/bank/race.md", "start\n"), 201)
    with ThreadPoolExecutor(8) as pool:
        racing = list(pool.map(lambda n: put(tenant, "memory/bank/race.md", f"writer {n}\n", if_match="1"), range(8)))
        appends = list(pool.map(
            lambda n: tenant.ingest.post("/v1/memory/daily", json={"text": f"- entry {n}", "date": "2026-11-28"}),
            range(12),
        ))  # fmt: skip
    statuses = sorted(r.status_code for r in racing)
    assert statuses == [200] + [409] * 7, [r.text for r in racing]
    (winner,) = [r for r in racing if r.status_code == 200]
    assert winner.json()["version"] == 2
    assert read(tenant, "memory/bank/race.md").json()["text"].startswith("writer ")

    assert sorted(r.status_code for r in appends) == [200] * 11 + [201]
    assert sorted(r.json()["version"] for r in appends) == list(range(1, 13))
    note = read(tenant, "memory/daily/2026-11-28.md").json()
    assert sorted(note["text"].split("\n")) == sorted(f"- entry {n}" for n in range(12))


async def _publish_directly(stack: LocalStack, event: MemoryWriteRequested) -> None:
    nc = await nats.connect(stack.nats_url)
    try:
        await nc.jetstream().publish(subject_for(event), encode_event(event), stream=INGEST_STREAM)
    finally:
        await nc.close()


def test_a_bad_write_that_bypassed_ingest_is_dead_lettered_with_the_reason(
    services: LocalStack, tenant: Tenant
) -> None:
    event = MemoryWriteRequested(tenant_id=tenant.tenant_id, path="memory/../../etc/passwd.md", mode="put", text="x")
    asyncio.run(_publish_directly(services, event))
    deadline = time.monotonic() + 20
    reasons: list[str] = []
    while not reasons and time.monotonic() < deadline:
        letters = asyncio.run(_stream(services, DEAD_LETTER_STREAM, "cairn-dead-letter.consolidation.*"))
        reasons = [m.headers.get("Cairn-Error", "") for m in letters if event.event_id.encode() in (m.data or b"")]
        time.sleep(0.05)
    assert reasons == ["poison event: memory write put 'memory/../../etc/passwd.md': path must not contain '.' or "
                       "'..' segments"]  # fmt: skip
    assert tenant.recall.get("/v1/memory/files").json()["files"] == []


def test_writes_while_consolidation_is_down_are_pending_then_applied_once(services: LocalStack, tenant: Tenant) -> None:
    services.kill_service("consolidation")
    try:
        pending = tenant.ingest.put("/v1/memory/files/MEMORY.md", json={"text": "# queued\n"})
        assert pending.status_code == 202, pending.text
        assert {k: pending.json()[k] for k in ("path", "version", "pending")} == {
            "path": "MEMORY.md", "version": None, "pending": True,
        }  # fmt: skip
        daily = {"text": "- queued entry", "date": "2026-11-27"}
        first = tenant.ingest.post("/v1/memory/daily", json=daily, headers={"Idempotency-Key": "down-1"})
        assert (first.status_code, first.json()["pending"]) == (202, True)
    finally:
        services.start_service("consolidation")
        services.wait_ready("consolidation")
    deadline = time.monotonic() + 30
    while read(tenant, "MEMORY.md").status_code == 404 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert read(tenant, "MEMORY.md").json()["text"] == "# queued\n"
    retry = tenant.ingest.post("/v1/memory/daily", json=daily, headers={"Idempotency-Key": "down-1"})
    assert (written(retry, 201)["version"], retry.json()["position"]) == (1, first.json()["position"])
    assert read(tenant, "memory/daily/2026-11-27.md").json()["text"] == "- queued entry"
