"""Memory records through the public API, on the real stack with no model configured: a repetition is kept once
(mem0 1674), a correction supersedes and keeps its history (as_of), another entity is untouched (graphiti 1728),
events are never merged, explicit "remember …" requests in four languages become records by rule, records render
into the bank with their date, a person's edit of a rendered line updates or retires its record, a concurrent
edit is never written over, and bad input is refused with problem+json naming the field."""

import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from cairn.local import LocalStack
from tests.conftest import Tenant
from tests.model_api import ModelServer, Reply

pytestmark = pytest.mark.e2e
WAIT_S = 30.0


def add(tenant: Tenant, text: str, **fields: Any) -> dict[str, str]:
    response = tenant.ingest.post("/v1/memory/records", json={"text": text, **fields})
    assert response.status_code == 202, response.text
    body: dict[str, str] = response.json()
    return body


def records(tenant: Tenant, consistent_with: str | None = None, **params: Any) -> list[dict[str, Any]]:
    query = {**params, **({"consistent_with": consistent_with} if consistent_with else {})}
    response = tenant.recall.get("/v1/memory/records", params=query)
    assert response.status_code == 200, response.text
    assert response.json()["indexing"] is False
    found: list[dict[str, Any]] = response.json()["records"]
    return found


def record(tenant: Tenant, record_id: str, consistent_with: str | None = None) -> dict[str, Any]:
    params = {"consistent_with": consistent_with} if consistent_with else {}
    response = tenant.recall.get(f"/v1/memory/records/{record_id}", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def bank(tenant: Tenant, name: str) -> tuple[str, int]:
    response = tenant.recall.get(f"/v1/memory/files/memory/bank/{name}", headers={"Accept": "text/markdown"})
    assert response.status_code == 200, response.text
    return response.text, int(response.headers["ETag"].strip('"'))


def texts(found: list[dict[str, Any]]) -> list[str]:
    return sorted(r["text"] for r in found)


def eventually_records(tenant: Tenant, count: int, **params: Any) -> list[dict[str, Any]]:
    """Records written from transcript entries carry no position to wait for: look until `count` are there."""
    deadline = time.monotonic() + WAIT_S
    while True:
        found = records(tenant, **params)
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def today() -> str:
    return f"{datetime.now(UTC):%Y-%m-%d}"


def test_a_repetition_is_kept_once_even_in_other_words(tenant: Tenant) -> None:
    first = add(tenant, "I love spicy food", kind="preference", relation="spicy food")
    again = add(tenant, "I love spicy food!", kind="preference", relation="spicy food")
    reworded = add(tenant, "I really love spicy food", kind="preference", relation="spicy food")
    kept = records(tenant, reworded["position"])
    assert [(r["record_id"], r["text"]) for r in kept] == [(first["record_id"], "I love spicy food")]
    assert set(kept[0]["merged_ids"]) == {again["record_id"], reworded["record_id"]}
    assert record(tenant, reworded["record_id"])["record_id"] == first["record_id"]  # the request's id finds it
    assert records(tenant, include_history="true") == kept  # nothing was superseded or retired
    assert bank(tenant, "preferences.md")[0].count("spicy food") == 1


def test_a_correction_supersedes_and_the_old_value_stays_readable_as_of_its_time(tenant: Tenant) -> None:
    old = add(tenant, "I eat spicy food", kind="preference", relation="spicy food", occurred_at="2026-11-01T12:00:00Z")
    new = add(tenant, "其实我不吃辣了", kind="preference", relation="spicy food", occurred_at="2026-12-01T12:00:00Z")
    current = records(tenant, new["position"])
    assert [(r["record_id"], r["text"]) for r in current] == [(new["record_id"], "其实我不吃辣了")]
    then = records(tenant, as_of="2026-11-15T00:00:00+00:00")
    assert [(r["record_id"], r["text"]) for r in then] == [(old["record_id"], "I eat spicy food")]
    assert then[0]["superseded_by"] == new["record_id"]
    assert then[0]["valid_until"].startswith("2026-12-01T12:00:00")
    read = record(tenant, new["record_id"])
    assert [h["record_id"] for h in read["history"]] == [old["record_id"]]
    assert read["provenance"]["origin"] == "agent"
    text, _ = bank(tenant, "preferences.md")
    assert "其实我不吃辣了（记于" in text
    assert "I eat spicy food" not in text


def test_records_of_another_entity_are_untouched(tenant: Tenant) -> None:
    sister = add(tenant, "My sister lives in Lisbon", kind="profile", entity="sister", relation="home city")
    mine = add(tenant, "I live in Porto", kind="profile", entity="user", relation="home city")
    current = records(tenant, mine["position"])
    assert {r["record_id"] for r in current} == {sister["record_id"], mine["record_id"]}
    assert all(r["superseded_by"] is None and r["retired_at"] is None for r in current)
    assert texts(records(tenant, entity="sister")) == ["My sister lives in Lisbon"]


def test_events_are_never_merged(tenant: Tenant) -> None:
    a = add(tenant, "Went to the gym this morning", kind="event", relation="gym")
    b = add(tenant, "Went to the gym in the morning", kind="event", relation="gym")  # cosine 0.935
    kept = records(tenant, b["position"], kind="event")
    assert {r["record_id"] for r in kept} == {a["record_id"], b["record_id"]}
    assert bank(tenant, "events.md")[0].count("Went to the gym") == 2


def test_a_retry_with_the_same_idempotency_key_adds_one_record(tenant: Tenant) -> None:
    headers = {"Idempotency-Key": "add-memory-7"}
    body = {"text": "I have a cat called Miso", "kind": "profile", "relation": "pets"}
    first = tenant.ingest.post("/v1/memory/records", json=body, headers=headers)
    again = tenant.ingest.post("/v1/memory/records", json=body, headers=headers)
    assert first.status_code == again.status_code == 202
    assert first.json() == again.json()
    assert [r["record_id"] for r in records(tenant, again.json()["position"])] == [first.json()["record_id"]]


def test_without_a_model_the_grey_zone_is_kept_as_new_and_reported_pending(tenant: Tenant) -> None:
    first = add(tenant, "I love spicy food", kind="preference", relation="spicy food")
    second = add(tenant, "Spicy food is what I love", kind="preference", relation="spicy food")  # cosine 0.80
    kept = {r["record_id"]: r for r in records(tenant, second["position"])}
    assert set(kept) == {first["record_id"], second["record_id"]}  # nothing superseded on a guess
    assert kept[second["record_id"]]["pending"] == "judgement"
    assert kept[first["record_id"]]["pending"] is None
    status = tenant.recall.get("/v1/memory/status").json()
    assert status["records"] == 2
    assert status["pending"]["record_judgements"] == 1
    assert any("wait for a model" in fallback for fallback in status["fallbacks"])


def test_with_a_model_the_grey_zone_is_judged_in_one_call(services: LocalStack, tenant: Tenant) -> None:
    admin = {"Authorization": f"Bearer {services.state.admin_token}"}
    with ModelServer() as server:
        override = httpx.put(
            f"{services.url('ingest')}/v1/admin/tenants/{tenant.tenant_id}/llm",
            json={"base_url": server.url, "model": "test-model"},
            headers=admin,
            timeout=10,
        )
        assert override.status_code == 200, override.text
        server.script(Reply("same"), Reply("update"))
        first = add(tenant, "I love spicy food", kind="preference", relation="spicy food")
        same = add(tenant, "Spicy food is what I love", kind="preference", relation="spicy food")
        assert [r["record_id"] for r in records(tenant, same["position"])] == [first["record_id"]]
        update = add(tenant, "Spicy food is what I love the most", kind="preference", relation="spicy food")
        current = records(tenant, update["position"])
        assert len(server.requests) == 2  # one call per grey-zone candidate, none for the first
        asked = server.requests[0].messages[-1]["content"]
        assert "I love spicy food" in asked
        assert "Spicy food is what I love" in asked
    assert [(r["record_id"], r["pending"]) for r in current] == [(update["record_id"], None)]
    assert record(tenant, update["record_id"])["history"][0]["record_id"] == first["record_id"]


def test_explicit_requests_in_four_languages_become_records_without_a_model(tenant: Tenant) -> None:
    said = {
        "Please remember that I'm allergic to peanuts": "I'm allergic to peanuts",
        "记住我女儿叫小雨": "我女儿叫小雨",
        "妹の名前は花子だって覚えておいてください": "妹の名前は花子だ",
        "나는 채식주의자라는 걸 기억해 줘": "나는 채식주의자",
    }
    for text in ["Do you remember what I said yesterday?", "下周二我去上海", *said]:
        tenant.say(text, channel="telegram", peer_id="42")
    found = eventually_records(tenant, len(said))
    assert texts(found) == sorted(said.values())
    assert all(r["explicit"] and r["importance"] == 1.0 and r["provenance"]["origin"] == "owner" for r in found)
    assert all(r["provenance"]["session_key"] == "agent:main:main" and r["provenance"]["message_ids"] for r in found)
    profile, _ = bank(tenant, "profile.md")
    assert f"- 我女儿叫小雨（记于 {today()}）" in profile
    preferences, _ = bank(tenant, "preferences.md")
    assert f"- I'm allergic to peanuts (noted on {today()})" in preferences


def test_records_render_into_the_bank_one_dated_line_each(tenant: Tenant) -> None:
    a = add(tenant, "I live in Porto", kind="profile", relation="home city")
    b = add(tenant, "I work as a nurse", kind="profile", relation="job")
    records(tenant, b["position"])
    text, version = bank(tenant, "profile.md")
    assert text == f"# Profile\n\n- I live in Porto (noted on {today()})\n- I work as a nurse (noted on {today()})\n"
    assert version == 2  # one version per rendered record
    found = tenant.recall.post(
        "/v1/memory/search",
        json={"query": "nurse", "corpus": "memory", "consistent_with": b["position"]},
    )
    assert found.status_code == 200, found.text
    assert found.json()["indexing"] is False  # the render's document change carries the request's position
    assert [hit["path"] for hit in found.json()["results"]][:1] == ["memory/bank/profile.md"]
    lines = {r["record_id"]: r["bank"] for r in records(tenant)}
    assert lines == {
        a["record_id"]: {"path": "memory/bank/profile.md", "line": 3},
        b["record_id"]: {"path": "memory/bank/profile.md", "line": 4},
    }


def test_editing_a_rendered_line_updates_its_record_and_removing_one_retires_it(tenant: Tenant) -> None:
    porto = add(tenant, "I live in Porto", kind="profile", relation="home city")
    nurse = add(tenant, "I work as a nurse", kind="profile", relation="job")
    records(tenant, nurse["position"])
    text, version = bank(tenant, "profile.md")
    edited = text.replace(f"- I live in Porto (noted on {today()})", "- I live in Braga").replace(
        f"- I work as a nurse (noted on {today()})\n", "- a line of my own\n"
    )
    response = tenant.ingest.put(
        "/v1/memory/files/memory/bank/profile.md", json={"text": edited}, headers={"If-Match": str(version)}
    )
    assert response.status_code == 200, response.text  # applied, with the records it touched, in one transaction
    current = records(tenant)
    assert [(r["text"], r["provenance"]["origin"]) for r in current] == [("I live in Braga", "owner")]
    history = {r["record_id"]: r for r in records(tenant, include_history="true")}
    assert history[porto["record_id"]]["superseded_by"] == current[0]["record_id"]
    assert history[nurse["record_id"]]["retired_reason"] == "edited"
    assert bank(tenant, "profile.md")[0] == edited  # the person's words are left as they wrote them


def test_a_concurrent_edit_is_never_written_over(tenant: Tenant) -> None:
    first = add(tenant, "I live in Porto", kind="profile", relation="home city")
    records(tenant, first["position"])
    seen, version = bank(tenant, "profile.md")
    second = add(tenant, "I work as a nurse", kind="profile", relation="job")  # rendered as version + 1
    records(tenant, second["position"])
    stale = tenant.ingest.put(
        "/v1/memory/files/memory/bank/profile.md",
        json={"text": seen + "- a line of my own\n"},
        headers={"If-Match": str(version)},
    )
    assert stale.status_code == 409, stale.text
    now, latest = bank(tenant, "profile.md")
    assert latest == version + 1
    assert "I work as a nurse" in now
    mine = tenant.ingest.put(
        "/v1/memory/files/memory/bank/profile.md",
        json={"text": now + "- a line of my own\n"},
        headers={"If-Match": str(latest)},
    )
    assert mine.status_code == 200, mine.text
    third = add(tenant, "I have a cat", kind="profile", relation="pets")  # rendered against the person's version
    records(tenant, third["position"])
    final, _ = bank(tenant, "profile.md")
    assert final.startswith(now + "- a line of my own\n")
    assert final.endswith(f"- I have a cat (noted on {today()})\n")
    assert len(records(tenant)) == 3


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    return body


def fields(body: dict[str, Any]) -> dict[str, str]:
    return {e["field"]: e["message"] for e in body.get("errors", [])}


def test_bad_record_requests_are_refused_naming_the_field_and_limit(tenant: Tenant, other_tenant: Tenant) -> None:
    post = tenant.ingest.post
    assert "text" in fields(problem(post("/v1/memory/records", json={}), 422))
    assert "whitespace" in fields(problem(post("/v1/memory/records", json={"text": " \n "}), 422))["text"]
    too_long = fields(problem(post("/v1/memory/records", json={"text": "x" * 2001}), 422))
    assert "2000" in too_long["text"]
    assert "kind" in fields(problem(post("/v1/memory/records", json={"text": "hi", "kind": "mood"}), 422))
    assert "importance" in fields(problem(post("/v1/memory/records", json={"text": "hi", "importance": 1.5}), 422))
    assert "agent_id" in fields(problem(post("/v1/memory/records", json={"text": "hi", "agent_id": "a b"}), 422))
    problem(httpx.post(f"{tenant.ingest.base_url}/v1/memory/records", json={"text": "hi"}), 401)
    get = tenant.recall.get
    assert "kind" in fields(problem(get("/v1/memory/records", params={"kind": "mood"}), 422))
    assert "as_of" in fields(problem(get("/v1/memory/records", params={"as_of": "yesterday"}), 422))
    assert "as_of" in fields(problem(get("/v1/memory/records", params={"as_of": "2026-12-01T00:00:00"}), 422))
    assert "500" in fields(problem(get("/v1/memory/records", params={"limit": 501}), 422))["limit"]
    assert "record_id" in fields(problem(get("/v1/memory/records/not-a-uuid"), 422))
    problem(get("/v1/memory/records/019ac8e1-7a40-7000-8000-000000000011"), 404)
    theirs = other_tenant.ingest.post("/v1/memory/records", json={"text": "I live in Porto"}).json()
    records(other_tenant, theirs["position"])
    problem(get(f"/v1/memory/records/{theirs['record_id']}"), 404)
    assert records(tenant) == []
