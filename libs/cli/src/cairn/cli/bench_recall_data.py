"""`cairn bench recall`'s datasets part: the questions of the shared retrieval datasets as recall inputs.

Each dataset gets a tenant, each conversation (`conv_id`) an agent. Every dataset session becomes one of the
owner's direct conversations: a dashboard thread `agent:<a>:dashboard:<uuid5 of session_id>` (direct, no peer:
the owner's, `recall_scope.person_of`), its turns sent in order through `POST /v1/messages/batch` at their own
times; in LoCoMo the conversation's first speaker is the user and the other the assistant. The agents keep
transcripts out of the memory index (`dm_scope: per-channel-peer`): recall's lanes search memory documents and,
in lane 2, the transcripts word for word, so embedding them would only load the machine.

Each question is then asked from a new dashboard thread, once with `active_memory.mode: always` and once with
`escalate` (how often the intent gate lets it through). Lane 1 finds nothing (no memory documents), so what is
injected comes from lane 2; with no model configured that is its extractive stand-in. Which sessions an
injection came from is read from its trace: the lane-2 candidates whose snippet the injected text shows. A
question counts as injected from a gold session when one of those is among its `gold_session_ids` (and as
`gold_and_other` too when another session was shown beside it), as injected-but-wrong when none is.
"""

import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from cairn.cli.bench import create_tenant
from cairn.cli.bench_memindex import _percentiles
from cairn.cli.bench_recall_calls import RecallBench, configure, recall_body
from cairn.cli.bench_retrieval import BATCH, Conversation, _jsonl, _wait_indexed
from cairn.cli.importer import parse_time, token

MODES = ("always", "escalate")
SHOWN_CHARS = 40  # this much of a candidate's snippet in the injected text: it is what was injected


@dataclass
class Loaded:
    """A dataset in cairn: its tenant's key, the agent of each conversation, and the dataset session of each
    thread."""

    api_key: str
    agents: dict[str, str] = field(default_factory=dict)
    session_of: dict[str, str] = field(default_factory=dict)


@dataclass
class Tally:
    samples: list[float] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)


def thread_key(agent: str, session_id: str) -> str:
    return f"agent:{agent}:dashboard:{uuid.uuid5(uuid.NAMESPACE_URL, session_id)}"


def _messages(agent: str, rows: list[dict[str, Any]], loaded: Loaded) -> list[dict[str, Any]]:
    user = rows[0]["speaker"]
    messages = []
    for row in rows:
        key = thread_key(agent, row["session_id"])
        loaded.session_of[key] = row["session_id"]
        messages.append({"agent_id": agent, "channel": "dashboard", "chat_type": "direct", "session_key": key,
                         "sender_name": row["speaker"], "role": "user" if row["speaker"] == user else "assistant",
                         "text": row["text"], "message_id": row["doc_id"],
                         "occurred_at": parse_time(row["timestamp"]).isoformat()})  # fmt: skip
    return messages


def load(endpoints: dict[str, str], data: Path) -> Loaded:
    """The dataset's conversations as the owner's dashboard threads, indexed before this returns."""
    by_conversation: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in _jsonl(data / "corpus.jsonl"):
        by_conversation[row["conv_id"]].append(row)
    loaded = Loaded(create_tenant(endpoints, f"bench-recall-{data.name}")[1])
    headers = {"Authorization": f"Bearer {loaded.api_key}"}
    conversations = []
    with httpx.Client(base_url=endpoints["CAIRN_INGEST_URL"], headers=headers, timeout=120) as ingest:
        for conv_id, rows in by_conversation.items():
            agent = loaded.agents[conv_id] = token(conv_id)
            configure(endpoints["CAIRN_INGEST_URL"], loaded.api_key, agent, {"dm_scope": "per-channel-peer"})
            messages = _messages(agent, sorted(rows, key=lambda r: (r["session_id"], r["turn_idx"])), loaded)
            position = ""
            for first in range(0, len(messages), BATCH):
                batch = {"messages": messages[first : first + BATCH]}
                results = ingest.post("/v1/messages/batch", json=batch).raise_for_status().json()["results"]
                if any("position" not in r for r in results):
                    raise SystemExit(f"{data.name}/{conv_id}: messages refused, e.g. {results}")
                position = results[-1]["position"]
            conversations.append(Conversation(loaded.api_key, agent, position))
    for conversation in conversations:
        _wait_indexed(endpoints["CAIRN_RECALL_URL"], conversation)
    return loaded


def judge(answer: dict[str, Any], trace: dict[str, Any], gold: set[str], session_of: dict[str, str]) -> list[str]:
    """What one recall counts as: its outcome, and for an injection where it came from."""
    said = [answer["outcome"]]
    if "lane2" in trace["timings_ms"]:
        said.append("lane2_ran")
    candidates = [c for c in trace["candidates"] if c.get("lane") == 2 and c.get("session_key")]
    if any(session_of.get(c["session_key"]) in gold for c in candidates):
        said.append("gold_in_candidates")
    if answer["outcome"] != "injected":
        return said
    said += [f"by_{item['source']}" for item in answer["items"] if item["lane"] == 2]
    text = " ".join(item["text"] for item in answer["items"])
    shown = {session_of.get(c["session_key"]) for c in candidates if _shows(c["snippet"], text)}
    if not shown:
        said.append("injected_unattributed")  # a model's own sentence, or a memory document
    elif shown & gold:
        said += ["injected_gold", "injected_gold_and_other"] if shown - gold else ["injected_gold"]
    else:
        said.append("injected_wrong")
    return said


def _shows(snippet: str, text: str) -> bool:
    head = " ".join(snippet.split())[:SHOWN_CHARS]
    return bool(head) and head in text


def ask(endpoints: dict[str, str], loaded: Loaded, questions: list[dict[str, Any]], mode: str) -> Tally:
    for agent in loaded.agents.values():
        configure(endpoints["CAIRN_INGEST_URL"], loaded.api_key, agent,
                  {"dm_scope": "per-channel-peer", "active_memory": {"mode": mode}})  # fmt: skip
    tally = Tally()
    headers = {"Authorization": f"Bearer {loaded.api_key}"}
    with httpx.Client(base_url=endpoints["CAIRN_RECALL_URL"], headers=headers, timeout=60) as recall:
        for question in questions:
            body = recall_body(loaded.agents[question["conv_id"]], question["question"])
            started = time.perf_counter()
            answer = recall.post("/v1/recall", json=body).raise_for_status().json()
            tally.samples.append(time.perf_counter() - started)
            trace = _trace(recall, answer["trace_id"])
            tally.counts.update(judge(answer, trace, set(question["gold_session_ids"]), loaded.session_of))
    return tally


def _trace(recall: httpx.Client, trace_id: str) -> dict[str, Any]:
    """The recall's trace: stored after the answer is sent, so it may take a moment (bounded)."""
    deadline = time.monotonic() + 5
    while True:
        response = recall.get(f"/v1/recall/traces/{trace_id}")
        if response.status_code != 404 or time.monotonic() > deadline:
            trace: dict[str, Any] = response.raise_for_status().json()
            return trace


def run_datasets(endpoints: dict[str, str], bench: RecallBench) -> list[dict[str, Any]]:
    rows = []
    for data in bench.data:
        loaded = load(endpoints, data)
        questions = _jsonl(data / "questions.jsonl")[: bench.questions]
        for mode in MODES:
            tally = ask(endpoints, loaded, questions, mode)
            c, figures = tally.counts, _percentiles(tally.samples)
            rows.append({"dataset": data.name, "mode": mode, "asked": len(questions), "lane2_ran": c["lane2_ran"],
                         "injected": c["injected"], "injected_gold": c["injected_gold"],
                         "gold_and_other": c["injected_gold_and_other"], "injected_wrong": c["injected_wrong"],
                         "unattributed": c["injected_unattributed"], "none": c["none"],
                         "other": len(questions) - c["injected"] - c["none"],
                         "gold_in_candidates": c["gold_in_candidates"], "p50_ms": figures["p50_ms"],
                         "p99_ms": figures["p99_ms"], "lane2_written_by": _lane2_by(c)})  # fmt: skip
    return rows


def _lane2_by(counts: Counter[str]) -> str:
    """Who wrote lane 2's injections: the model, or (no model configured) the extractive stand-in."""
    return ", ".join(f"{name.removeprefix('by_')} {n}" for name, n in sorted(counts.items()) if name.startswith("by_"))


def dataset_folders(names: str, root: Path) -> tuple[Path, ...]:
    """`locomo,memorybank-cn` under `root` (the shared datasets folder), each holding corpus + questions."""
    folders = tuple(root / name for name in names.split(",") if name)
    missing = [str(f) for f in folders if not (f / "questions.jsonl").exists()]
    if missing:
        raise SystemExit(f"no dataset at {', '.join(missing)} (corpus.jsonl and questions.jsonl)")
    return folders
