"""`cairn bench retrieval`: how well cairn finds what was said, scored by `../shared/eval/evaluate.py`.

Ingests a dataset's `corpus.jsonl` through the public write API (one tenant per `conv_id`, the original
times as `occurred_at`, `doc_id` as the adapter's `message_id`), waits until every tenant's index has
reached its last write, asks each question of `questions.jsonl` through the public query API and writes
the ranked `doc_id`s (top 50) per question in the scorer's run format.

Modes: `sessions` asks `POST /v1/sessions/search` (visibility `all`) in two pages of 25, the API's
largest `limit`, using its `offset` (the order is stable, so pages never overlap); `memory` asks
`POST /v1/memory/search` over memory and transcripts (`corpus: all`, limit 50) and maps the transcript
entries of its hits to doc ids through session history, which names each message's adapter id, ranking
the messages of all hits by their own scores; `all` merges both lists by reciprocal rank.
"""

import json
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from cairn.cli.bench import new_tenant
from cairn.cli.importer import to_message

TOP = 50
PAGE = 25  # the API's largest `limit`
BATCH = 500
MODES = ("sessions", "memory", "all")


class EndpointMissing(SystemExit):
    """The stack does not serve an endpoint this mode needs (yet)."""


@dataclass(frozen=True)
class Conversation:
    """One isolated memory of the dataset: its own tenant, its agent, the last write's position."""

    api_key: str
    agent_id: str
    position: str


@dataclass(frozen=True)
class RetrievalResult:
    dataset: str
    mode: str
    conversations: int
    messages: int
    questions: int
    ingest_seconds: float
    index_wait_seconds: float
    query_seconds: float
    query_ms_mean: float
    empty_answers: int


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def _progress(label: str, done: int, total: int, started: float) -> None:
    rate = done / max(time.perf_counter() - started, 1e-9)
    sys.stderr.write(f"\r{label}: {done}/{total} ({rate:,.0f}/s)")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _ingest(endpoints: dict[str, str], conv_id: str, rows: list[dict[str, Any]]) -> Conversation:
    """A fresh tenant holding one conversation, its turns sent in order through the batch API."""
    key = new_tenant(endpoints, f"bench-retrieval-{conv_id}")
    messages = [to_message(row) for row in rows]
    position = ""
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=endpoints["CAIRN_INGEST_URL"], headers=headers, timeout=120) as ingest:
        for first in range(0, len(messages), BATCH):
            batch = messages[first : first + BATCH]
            response = ingest.post("/v1/messages/batch", json={"messages": batch}).raise_for_status().json()
            errors = [r for r in response["results"] if "position" not in r]
            if errors:
                raise SystemExit(f"{conv_id}: {len(errors)} messages rejected, e.g. {errors[0]}")
            position = response["results"][-1]["position"]
    return Conversation(key, messages[0]["agent_id"], position)


def _wait_indexed(recall_url: str, conversation: Conversation, timeout_s: float = 600) -> None:
    """Read-your-writes: each search waits (bounded) for the position; repeat until it is reached."""
    headers = {"Authorization": f"Bearer {conversation.api_key}"}
    body = {"agent_id": conversation.agent_id, "query": "x", "consistent_with": conversation.position}
    deadline = time.monotonic() + timeout_s
    with httpx.Client(base_url=recall_url, headers=headers, timeout=60) as recall:
        while recall.post("/v1/sessions/search", json=body).raise_for_status().json()["indexing"]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"not indexed within {timeout_s:.0f}s")


def _wait_memory_indexed(recall_url: str, conversation: Conversation, timeout_s: float = 600) -> None:
    """Memory search's own read-your-writes wait (transcripts join memory after a debounce, then are
    embedded: minutes for a long conversation on a loaded machine); at the bound the run goes on with
    what is indexed, and says so."""
    headers = {"Authorization": f"Bearer {conversation.api_key}"}
    body = {"agent_id": conversation.agent_id, "query": "x", "corpus": "all", "consistent_with": conversation.position}
    deadline = time.monotonic() + timeout_s
    with httpx.Client(base_url=recall_url, headers=headers, timeout=60) as recall:
        while True:
            response = recall.post("/v1/memory/search", json=body)
            if response.status_code == 404:
                raise EndpointMissing(
                    "POST /v1/memory/search answered 404: this stack has no memory search yet (issue 5); "
                    "use --mode sessions"
                )
            if not response.raise_for_status().json().get("indexing", False):
                return
            if time.monotonic() > deadline:
                print(f"warning: memory search still indexing after {timeout_s:.0f}s; going on", file=sys.stderr)
                return


def _sessions_ranking(recall: httpx.Client, agent_id: str, question: str) -> list[str]:
    """Top 50 through session search: two pages of 25, the adapter's ids (doc ids) in rank order."""
    ranked: list[str] = []
    for offset in range(0, TOP, PAGE):
        body = {"agent_id": agent_id, "query": question, "limit": PAGE, "offset": offset, "visibility": "all"}
        response = recall.post("/v1/sessions/search", json=body)
        if response.status_code == 404:
            raise EndpointMissing("POST /v1/sessions/search answered 404: is the recall service up to date?")
        hits = response.raise_for_status().json()["results"]
        ranked.extend(hit.get("external_id") or hit["message_id"] for hit in hits)
        if len(hits) < PAGE:
            break
    return list(dict.fromkeys(ranked))[:TOP]


def _memory_ranking(recall: httpx.Client, agent_id: str, question: str, resolve: dict[str, str]) -> list[str]:
    """Top hits of memory search over memory and transcripts; transcript hits name their messages."""
    body = {"agent_id": agent_id, "query": question, "limit": TOP, "corpus": "all"}
    response = recall.post("/v1/memory/search", json=body)
    if response.status_code == 404:
        raise EndpointMissing(
            "POST /v1/memory/search answered 404: this stack has no memory search yet (issue 5); use --mode sessions"
        )
    if response.status_code == 422 and "limit" in response.text:
        body["limit"] = 25
        response = recall.post("/v1/memory/search", json=body)
    return rank_messages(response.raise_for_status().json()["results"], resolve)


def rank_messages(hits: list[dict[str, Any]], resolve: dict[str, str]) -> list[str]:
    """The messages of all hits by their own scores (`message_scores`, comparable across hits), best
    first; a message in several hits counts at its best. Without scores (an older stack) a hit's
    messages take its score, in the hit's order."""
    best: dict[str, float] = {}
    for hit in hits:
        ids = [resolve.get(m, m) for m in hit.get("message_ids") or []]
        scores = hit.get("message_scores") or []
        for i, message in enumerate(ids):
            score = scores[i] if len(scores) == len(ids) else hit["score"]
            best[message] = max(best.get(message, score), score)
    return sorted(best, key=lambda m: -best[m])[:TOP]


def memory_then_sessions(memory: list[str], sessions: list[str]) -> list[str]:
    """`--mode all`: memory search's ranking, then what session search found beyond it. Memory search
    already ranks every remembered message by its words as well as its meaning, so session search adds
    recall below memory's list rather than a second vote on its order. On LoCoMo (same run's lists)
    reciprocal-rank fusion of the two lowered turn R@10 from memory's 0.799 to 0.716 (equal weights)
    and 0.749 (session search weighted 0.25), and never raised session R@5 (0.893–0.895 against 0.898)."""
    listed = set(memory)
    return (memory + [doc for doc in sessions if doc not in listed])[:TOP]


def _resolver(recall_url: str, conversation: Conversation) -> dict[str, str]:
    """cairn's message ids of a conversation mapped to the adapter's (doc ids), read from session history."""
    headers = {"Authorization": f"Bearer {conversation.api_key}"}
    agent, resolved = conversation.agent_id, {}
    with httpx.Client(base_url=recall_url, headers=headers, timeout=60) as recall:
        keys: list[str] = []
        cursor: str | None = None
        while True:
            params: dict[str, str | int] = {"agent_id": agent, "limit": 200}
            if cursor:
                params["cursor"] = cursor
            listing = recall.get("/v1/sessions", params=params).raise_for_status().json()
            keys += [session["session_key"] for session in listing["sessions"]]
            if not (cursor := listing["next_cursor"]):
                break
        for key in keys:
            offset: int | None = 0
            while offset is not None:
                page = recall.get(f"/v1/sessions/{key}/history", params={"agent_id": agent, "limit": 200,
                                                                          "offset": offset})  # fmt: skip
                body = page.raise_for_status().json()
                resolved.update({m["message_id"]: m["external_id"] for m in body["messages"] if m.get("external_id")})
                offset = body["next_offset"]
    return resolved


def _rank(mode: str, recall: httpx.Client, agent_id: str, question: str, resolve: dict[str, str]) -> list[str]:
    if mode == "sessions":
        return _sessions_ranking(recall, agent_id, question)
    memory = _memory_ranking(recall, agent_id, question, resolve)
    return memory if mode == "memory" else memory_then_sessions(memory, _sessions_ranking(recall, agent_id, question))


def run_retrieval(
    endpoints: dict[str, str], data: Path, out: Path, mode: str, index_timeout_s: float = 600
) -> RetrievalResult:
    corpus = _jsonl(data / "corpus.jsonl")
    questions = _jsonl(data / "questions.jsonl")
    by_conversation: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in corpus:
        by_conversation[row["conv_id"]].append(row)

    started = time.perf_counter()
    conversations: dict[str, Conversation] = {}
    for done, (conv_id, rows) in enumerate(by_conversation.items(), 1):
        conversations[conv_id] = _ingest(endpoints, conv_id, rows)
        _progress("ingest (conversations)", done, len(by_conversation), started)
    ingested = time.perf_counter()
    for conversation in conversations.values():
        _wait_indexed(endpoints["CAIRN_RECALL_URL"], conversation, index_timeout_s)
    indexed = time.perf_counter()
    print(f"ingested {len(corpus)} messages in {ingested - started:.1f}s; indexed after {indexed - ingested:.1f}s more")
    resolvers: dict[str, dict[str, str]] = {conv_id: {} for conv_id in conversations}
    if mode != "sessions":
        for conv_id, conversation in conversations.items():
            _wait_memory_indexed(endpoints["CAIRN_RECALL_URL"], conversation, index_timeout_s)
            resolvers[conv_id] = _resolver(endpoints["CAIRN_RECALL_URL"], conversation)
        indexed = time.perf_counter()

    lines, empty = [], 0
    for done, question in enumerate(questions, 1):
        conversation = conversations[question["conv_id"]]
        headers = {"Authorization": f"Bearer {conversation.api_key}"}
        with httpx.Client(base_url=endpoints["CAIRN_RECALL_URL"], headers=headers, timeout=60) as recall:
            ranked = _rank(mode, recall, conversation.agent_id, question["question"], resolvers[question["conv_id"]])
        empty += not ranked
        lines.append({"question_id": question["question_id"], "ranked_ids": ranked})
        if done % 25 == 0 or done == len(questions):
            _progress("questions", done, len(questions), indexed)
    answered = time.perf_counter()
    _write_run(out, lines)
    print(f"written {out} ({len(lines)} questions); score it with:")
    print(f"  python ../shared/eval/evaluate.py {data} {out} --level turn|session")
    return RetrievalResult(
        dataset=data.name,
        mode=mode,
        conversations=len(conversations),
        messages=len(corpus),
        questions=len(questions),
        ingest_seconds=round(ingested - started, 3),
        index_wait_seconds=round(indexed - ingested, 3),
        query_seconds=round(answered - indexed, 3),
        query_ms_mean=round(1000 * (answered - indexed) / max(len(questions), 1), 2),
        empty_answers=empty,
    )


def _write_run(out: Path, lines: Iterable[dict[str, Any]]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as run:
        for line in lines:
            run.write(json.dumps(line, ensure_ascii=False) + "\n")


def report_retrieval(result: RetrievalResult, out: Path) -> None:
    """The timings as a table, and as JSON under bench-results/ next to the other benchmarks."""
    print(f"{'figure':<34}{'value':>14}")
    for name, value in asdict(result).items():
        print(f"{name:<34}{value!s:>14}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"benchmark": "retrieval", **asdict(result)}, indent=2))
    print(f"written {out}")
