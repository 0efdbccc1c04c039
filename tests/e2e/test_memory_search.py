"""Memory search end to end: documents and remembered conversations are chunked and embedded by the
indexer (the real local model) and found through `POST /v1/memory/search` by meaning and by exact
words; edits and deletions replace chunks; dated notes decay; status tells what the index holds."""

import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from cairn.local import LocalStack
from cairn.recall.recall_lanes import NO_MODEL
from tests.conftest import Tenant

pytestmark = pytest.mark.e2e

FACTS = {
    "memory/bank/food.md": "- 他忌口，不吃辣椒",
    "memory/bank/health.md": "- peanuts make me sick",
    "memory/bank/music.md": "- She is learning to play the piano on weekends",
    "memory/bank/travel.md": "- 下个月去东京出差，住在新宿",
    "memory/bank/work.md": "- The quarterly report is due on Friday",
    "memory/bank/sport.md": "- 他每天早上跑步五公里",
}


class Memory:
    """Writes documents through the public write API and searches through the query API, each search
    consistent with the last write (read-your-writes)."""

    def __init__(self, stack: LocalStack, tenant: Tenant) -> None:
        self.stack, self.tenant = stack, tenant
        self.position: str | None = None

    def write(self, documents: dict[str, str]) -> None:
        for path, text in documents.items():
            response = self.tenant.ingest.put(f"/v1/memory/files/{path}", json={"text": text})
            assert response.status_code in (200, 201), response.text
            self.position = response.json()["position"]

    def delete(self, path: str) -> None:
        response = self.tenant.ingest.delete(f"/v1/memory/files/{path}")
        assert response.status_code == 200, response.text
        self.position = response.json()["position"]

    def search(self, query: str, **fields: Any) -> list[dict[str, Any]]:
        body = {"query": query, "consistent_with": self.position, **fields}
        response = self.tenant.recall.post("/v1/memory/search", json=body)
        assert response.status_code == 200, response.text
        assert response.json()["indexing"] is False
        results: list[dict[str, Any]] = response.json()["results"]
        return results

    def status(self) -> dict[str, Any]:
        response = self.tenant.recall.get("/v1/memory/status")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def settle(self, check: Any, within: float = 30.0) -> Any:
        deadline = time.monotonic() + within
        while True:
            result = check()
            if result or time.monotonic() > deadline:
                return result
            time.sleep(0.1)


@pytest.fixture
def memory(services: LocalStack, tenant: Tenant) -> Memory:
    return Memory(services, tenant)


def _indexed(memory: Memory, chunks: int) -> bool:
    """After a search consistent with the last write, the index holds what was written."""
    memory.search("x")
    status = memory.status()
    return bool(status["counts"]["memory_chunks"] == chunks and status["pending"]["documents"] == 0)


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ("用户不喜欢吃辣", "memory/bank/food.md"),
        ("allergic to peanuts", "memory/bank/health.md"),
        ("does he exercise", "memory/bank/sport.md"),
        ("business trip to Japan", "memory/bank/travel.md"),
    ],
)
def test_meaning_is_found_without_shared_words(memory: Memory, query: str, path: str) -> None:
    memory.write(FACTS)
    assert memory.settle(lambda: _indexed(memory, len(FACTS)))
    results = memory.search(query)
    assert results[0]["path"] == path, results
    hit = results[0]
    assert hit["source"] == "memory"
    assert hit["message_ids"] == []
    assert (hit["start_line"], hit["end_line"]) == (1, 1)
    opened = memory.tenant.recall.get(hit["citation"])
    assert opened.status_code == 200, hit["citation"]
    assert opened.json()["text"].strip() == FACTS[path]


def test_an_exact_identifier_is_found_by_its_words(memory: Memory) -> None:
    memory.write({
        "memory/bank/ci.md": "- CI breaks with ERR_CONN_REFUSED when the proxy is down (PR #4822)",
        "memory/bank/net.md": "- the deploy failed with ERR_CONN_RESET, fixed in PR #4821",
        "memory/bank/misc.md": "- network errors happen when the VPN reconnects",
    })  # fmt: skip
    assert memory.settle(lambda: _indexed(memory, 3))
    assert memory.search("ERR_CONN_RESET")[0]["path"] == "memory/bank/net.md"
    assert memory.search("PR 4821")[0]["path"] == "memory/bank/net.md"
    assert memory.search("ERR_CONN_REFUSED")[0]["path"] == "memory/bank/ci.md"


def test_an_edit_replaces_the_chunks_and_a_delete_removes_them(memory: Memory) -> None:
    memory.write({"memory/bank/pet.md": "- the cat is called Mochi"})
    assert memory.settle(lambda: _indexed(memory, 1))
    assert memory.search("Mochi")[0]["path"] == "memory/bank/pet.md"

    memory.write({"memory/bank/pet.md": "- the dog is called Biscuit\n- Biscuit is a beagle"})
    assert memory.search("Biscuit")[0]["path"] == "memory/bank/pet.md"
    assert all("Mochi" not in r["snippet"] for r in memory.search("Mochi"))
    assert memory.status()["counts"]["memory_chunks"] == 2  # a bank file is cut entry by entry
    hit = memory.search("beagle")[0]  # the entry that says it (the other one may follow, found by meaning)
    assert (hit["path"], hit["start_line"], hit["end_line"]) == ("memory/bank/pet.md", 2, 2)

    memory.delete("memory/bank/pet.md")
    assert memory.search("Biscuit beagle") == []
    assert memory.status()["chunks"] == 0


def test_dated_notes_decay_and_evergreen_ones_do_not(memory: Memory) -> None:
    today = datetime.now(UTC).date()
    old = today - timedelta(days=60)
    text = "- we chose Postgres for the ledger service"
    memory.write({
        f"memory/daily/{today.isoformat()}.md": text,
        f"memory/daily/{old.isoformat()}.md": text,
        "MEMORY.md": text,
    })  # fmt: skip
    assert memory.settle(lambda: _indexed(memory, 3))
    scores = {r["path"]: r["score"] for r in memory.search("ledger database choice")}
    assert scores[f"memory/daily/{old.isoformat()}.md"] == pytest.approx(scores["MEMORY.md"] / 4, rel=0.01)
    assert scores[f"memory/daily/{today.isoformat()}.md"] == pytest.approx(scores["MEMORY.md"], rel=0.01)


def test_min_score_and_limit(memory: Memory) -> None:
    memory.write(FACTS)
    assert memory.settle(lambda: _indexed(memory, len(FACTS)))
    assert len(memory.search("他", limit=2)) <= 2
    everything = memory.search("allergic to peanuts", limit=10)
    strong = memory.search("allergic to peanuts", limit=10, min_score=everything[0]["score"])
    assert [r["path"] for r in strong] == [everything[0]["path"]]


def test_bad_search_input_names_the_field(tenant: Tenant) -> None:
    cases = [
        ({"query": ""}, "query"),
        ({"query": "x", "limit": 0}, "limit"),
        ({"query": "x", "corpus": "web"}, "corpus"),
        ({"query": "x", "min_score": 2}, "min_score"),
    ]
    for body, field in cases:
        response = tenant.recall.post("/v1/memory/search", json=body)
        assert response.status_code == 422
        assert response.headers["content-type"].startswith("application/problem+json")
        assert any(field in e["field"] for e in response.json()["errors"]), response.json()


def _session_hits(memory: Memory, query: str, **fields: Any) -> list[dict[str, Any]]:
    return [r for r in memory.search(query, corpus="sessions", **fields) if r["source"] == "sessions"]


def test_remembered_conversations_are_found_with_their_messages(memory: Memory) -> None:
    tenant = memory.tenant
    tenant.say("I adopted a golden retriever called Max", message_id="d1", sender_name="Ana")
    tenant.say("Congratulations! Golden retrievers are lovely.", message_id="d2", role="assistant")
    written = tenant.say("secret plan in the group: the golden retriever party", message_id="g1",
                         chat_type="group", chat_id="g-1", channel="telegram", peer_id="7")  # fmt: skip
    memory.position = written["position"]  # read-your-writes waits out the debounce of the direct session
    hits = _session_hits(memory, "what kind of dog do I have")
    assert hits, memory.status()
    hit = hits[0]
    assert hit["path"] == "sessions/agent:main:main"
    assert hit["session_key"] == "agent:main:main"
    assert "User (Ana): I adopted a golden retriever called Max" in hit["snippet"]
    assert "Assistant: Congratulations!" in hit["snippet"]
    assert sorted(hit["message_ids"]) == ["d1", "d2"]  # as written by the adapter
    assert len(set(hit["cairn_message_ids"])) == 2
    history = tenant.recall.get(hit["citation"])
    assert history.status_code == 200, hit["citation"]
    assert {m["cairn_message_id"] for m in history.json()["messages"]} >= set(hit["cairn_message_ids"])
    assert all("party" not in r["snippet"] for r in memory.search("golden retriever party", corpus="all"))
    # the asking session never finds itself
    assert _session_hits(memory, "golden retriever", caller_session_key="agent:main:main") == []
    assert memory.search("golden retriever", corpus="memory") == []


def test_secrets_never_reach_the_memory_index(memory: Memory) -> None:
    token = "sk-" + uuid.uuid4().hex + "abcdef"
    memory.tenant.say(f"my OpenAI key is {token} for the billing bot", message_id="s1")
    hits = memory.settle(lambda: _session_hits(memory, "billing bot key"))
    assert hits
    assert "billing bot" in hits[0]["snippet"]
    assert all(token not in hit["snippet"] for hit in [*hits, *_session_hits(memory, token)])


def test_turning_remembering_off_forgets_the_transcripts(memory: Memory) -> None:
    tenant = memory.tenant
    tenant.say("the wifi password hint is the name of our first boat", message_id="w1")
    assert memory.settle(lambda: _session_hits(memory, "wifi boat"))
    off = tenant.ingest.put("/v1/agents/main/config", json={"remember_across_conversations": False})
    assert off.status_code == 200, off.text
    assert memory.settle(lambda: not _session_hits(memory, "wifi boat"))
    tenant.say("the boat was called Seagull", message_id="w2")
    on = tenant.ingest.put("/v1/agents/main/config", json={"remember_across_conversations": True})
    assert on.status_code == 200, on.text

    # w2 reaches the memory index through the session service, the setting directly: they may arrive in
    # either order, and a chunk of w1 alone can be found first; the chunk settles to both turns
    def both_turns() -> list[dict[str, Any]]:
        hits = _session_hits(memory, "wifi boat Seagull")
        return hits if hits and len(hits[0]["message_ids"]) == 2 else []

    hits = memory.settle(both_turns)
    assert hits, "the top hit is the chunk holding both turns"


def test_status_reports_the_provider_and_what_is_indexed(memory: Memory) -> None:
    memory.write({"MEMORY.md": "- prefers tea\n- lives in Lyon", "memory/bank/a.md": "- likes chess"})
    assert memory.settle(lambda: _indexed(memory, 3))
    status = memory.status()
    assert status["provider"] == "local"
    assert status["dimensions"] == 512
    assert status["model"].startswith("use-multilingual-v3@")
    assert (status["documents"], status["chunks"]) == (2, 3)  # every list item is a chunk, however short
    assert status["pending"] == {"sessions": 0, "documents": 0, "reembed": 0, "flushes": 0, "record_judgements": 0}
    assert status["counts"]["messages_without_current_vector"] == 0
    assert status["fallbacks"] == [NO_MODEL]  # the test stack's recall has no model: lane 2 is extractive
    assert status["index_lag_s"] == 0.0


def test_another_tenant_finds_nothing(memory: Memory, other_tenant: Tenant) -> None:
    memory.write(FACTS)
    assert memory.settle(lambda: _indexed(memory, len(FACTS)))
    response = other_tenant.recall.post("/v1/memory/search", json={"query": "peanuts"})
    assert response.status_code == 200
    assert response.json()["results"] == []
    assert other_tenant.recall.get("/v1/memory/status").json()["chunks"] == 0


def test_unauthenticated_search_is_refused(services: LocalStack) -> None:
    response = httpx.post(f"{services.url('recall')}/v1/memory/search", json={"query": "x"})
    assert response.status_code == 401


def test_a_named_day_and_the_most_relevant_message_come_first(memory: Memory) -> None:
    tenant = memory.tenant
    said = [
        ("m1", "2026-05-02T10:00:00+00:00", "I visited the science museum and saw the dinosaur exhibition"),
        ("m2", "2026-05-02T10:01:00+00:00", "Then I walked home along the river"),
        ("m3", "2026-05-04T18:00:00+00:00", "I bought a new bicycle today"),
        ("m4", "2026-05-04T18:01:00+00:00", "The weather was rainy all afternoon"),
        ("m5", "2026-05-04T18:02:00+00:00", "We cooked pasta with tomato sauce for dinner"),
    ]
    for message_id, at, text in said:
        memory.position = tenant.say(text, message_id=message_id, occurred_at=at)["position"]
    (first, *_) = _session_hits(memory, "What did I tell you on May 2nd?")
    assert set(first["message_ids"]) == {"m1", "m2"}
    assert first["occurred_at"].startswith("2026-05-02")
    dinner = [h for h in _session_hits(memory, "what did we have for dinner") if "m5" in h["message_ids"]]
    assert dinner[0]["message_ids"][0] == "m5"
    assert dinner[0]["cairn_message_ids"][0] in tenant.recall.get(dinner[0]["citation"]).text


def test_messages_carry_scores_that_rank_them_across_hits(memory: Memory) -> None:
    tenant = memory.tenant
    said = [  # two sittings hours apart: two chunks, two hits
        ("r1", "2026-06-05T09:00:00+00:00", "user", "Which restaurant should we book for Friday night?"),
        ("r2", "2026-06-05T09:01:00+00:00", "assistant", "Let's try Chez Marcel, their onion soup is famous."),
        ("r3", "2026-06-05T09:02:00+00:00", "user", "By the way, my sister visits next week."),
        ("r4", "2026-06-05T09:03:00+00:00", "assistant", "Nice, say hello to her from me."),
        ("o1", "2026-06-05T18:00:00+00:00", "user", "I repotted the basil on the balcony."),
        ("o2", "2026-06-05T18:01:00+00:00", "assistant", "Basil likes plenty of sun and little water."),
    ]
    for message_id, at, role, text in said:
        memory.position = tenant.say(text, message_id=message_id, occurred_at=at, role=role)["position"]
    hits = _session_hits(memory, "which restaurant did we book for Friday", limit=10)
    assert {m for h in hits for m in h["message_ids"]} == {"r1", "r2", "r3", "r4", "o1", "o2"}
    scored: dict[str, float] = {}
    for hit in hits:
        scores = hit["message_scores"]
        assert len(scores) == len(hit["message_ids"]) == len(hit["cairn_message_ids"])
        assert scores == sorted(scores, reverse=True)  # most relevant first
        assert all(0 <= s <= 1 for s in scores)
        scored.update(zip(hit["message_ids"], scores, strict=True))
    ranked = sorted(scored, key=lambda m: -scored[m])
    assert ranked[:2] == ["r1", "r2"]  # the question, then its answer beside it
    assert max(scored["o1"], scored["o2"]) < scored["r2"]
    # documents have no messages, so no scores
    memory.write({"memory/bank/food.md": "- Friday dinners are at Chez Marcel"})
    documents = memory.search("restaurant on Friday", corpus="memory")
    assert documents
    assert documents[0]["message_scores"] == []
