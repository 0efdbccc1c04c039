"""`cairn bench recall`'s calibrate part: lane 1's `min_score` read off data rather than set by hand.

Each dataset gets a tenant, each conversation (`conv_id`) an agent whose trusted bank (`memory/bank/calibration.md`,
one list item per line) holds that conversation's gold evidence — the turns its questions cite (`gold_doc_ids`),
or the turns of their gold sessions when a dataset names sessions only (MemoryBank) — shuffled among
`DISTRACTORS` turns of the dataset's other conversations. Every question is then asked through `POST /v1/recall`
with lane 2 off; its trace lists lane 1's candidates with their scores, whatever `min_score` is. Of each question
the top candidate's score and whether its line is one of the question's own gold turns are kept: at a threshold
`t`, lane 1 injects when the top score is `t` or more, a right injection when the top line is gold, a wrong one
otherwise (another question's evidence counts as wrong too: it is not what was asked).

Per threshold: precision (right / injected), recall (right / asked), and the wrong-injection rate
(wrong / injected). The suggested `min_score` is the lowest threshold whose wrong-injection rate on the first
dataset (LoCoMo, by many questions the largest) is at most `WRONG_AT_MOST` with at least `LEAST_INJECTED`
injections; the other datasets are held out and read at that threshold.
"""

import random
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from cairn.cli.bench import create_tenant
from cairn.cli.bench_recall_calls import RecallBench, configure, recall_body
from cairn.cli.bench_retrieval import Conversation, _jsonl, _wait_memory_indexed

BANK = "memory/bank/calibration.md"
DISTRACTORS = 200  # turns of other conversations in each agent's bank
THRESHOLDS = tuple(round(0.30 + 0.05 * i, 2) for i in range(14))  # 0.30 … 0.95
WRONG_AT_MOST = 0.10
LEAST_INJECTED = 10  # a threshold that injects almost nothing says nothing about its wrong-injection rate
TRACE_WITHIN_S = 5.0
SEED = 29


@dataclass(frozen=True)
class Asked:
    """One question's lane-1 result: the best candidate's score (None: no candidate) and whether it was gold."""

    dataset: str
    top_score: float | None
    top_is_gold: bool


def evidence(questions: list[dict[str, Any]], corpus: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Each question's gold turns: its `gold_doc_ids`, else every turn of its `gold_session_ids`."""
    by_session: dict[str, set[str]] = defaultdict(set)
    for row in corpus:
        by_session[row["session_id"]].add(row["doc_id"])
    return {
        q["question_id"]: set(q["gold_doc_ids"])
        or {doc for session in q["gold_session_ids"] for doc in by_session.get(session, ())}
        for q in questions
    }


def entry_line(row: dict[str, Any]) -> str:
    """A turn as one bank entry: its day and speaker, on one line (a list item per turn)."""
    text = " ".join(str(row["text"]).split())
    speaker = str(row.get("speaker") or "")
    said = text if not speaker or text.startswith(f"{speaker}:") else f"{speaker}: {text}"
    return f"- [{row['timestamp']}] {said}"


def banks(
    corpus: list[dict[str, Any]], gold: dict[str, set[str]], questions: list[dict[str, Any]], rng: random.Random
) -> dict[str, list[str]]:
    """Per conversation the doc ids of its bank's entries, in line order: its questions' evidence among
    distractors from the other conversations."""
    conv_of = {row["doc_id"]: row["conv_id"] for row in corpus}
    wanted: dict[str, set[str]] = defaultdict(set)
    for q in questions:
        wanted[q["conv_id"]] |= {doc for doc in gold[q["question_id"]] if doc in conv_of}
    out = {}
    for conv, docs in wanted.items():
        others = sorted(doc for doc, c in conv_of.items() if c != conv)
        entries = sorted(docs) + rng.sample(others, min(DISTRACTORS, len(others)))
        rng.shuffle(entries)
        out[conv] = entries
    return out


def _write_bank(ingest: httpx.Client, agent: str, lines: list[str]) -> str:
    """The bank file (line i+1 is entry i); the write's position."""
    body = {"agent_id": agent, "text": "\n".join(lines) + "\n"}
    return str(ingest.put(f"/v1/memory/files/{BANK}", json=body).raise_for_status().json()["position"])


def _trace(recall: httpx.Client, trace_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + TRACE_WITHIN_S
    while True:
        response = recall.get(f"/v1/recall/traces/{trace_id}")
        if response.status_code != 404 or time.monotonic() > deadline:
            trace: dict[str, Any] = response.raise_for_status().json()
            return trace


def top_of(candidates: list[dict[str, Any]], entries: list[str]) -> tuple[float | None, str | None]:
    """Lane 1's best candidate of the bank: its score and the doc id of its line (first of the best on a tie)."""
    mine = [c for c in candidates if c.get("lane") == 1 and c.get("path") == BANK]
    if not mine:
        return None, None
    best = max(mine, key=lambda c: float(c["score"]))
    line = int(best["lines"][0])
    return float(best["score"]), entries[line - 1] if 0 < line <= len(entries) else None


def ask_dataset(endpoints: dict[str, str], data: Path, limit: int | None) -> list[Asked]:
    corpus = _jsonl(data / "corpus.jsonl")
    questions = _jsonl(data / "questions.jsonl")[:limit]
    gold = evidence(questions, corpus)
    rows = {row["doc_id"]: row for row in corpus}
    bank_of = banks(corpus, gold, questions, random.Random(SEED))
    api_key = create_tenant(endpoints, f"bench-recall-calibrate-{data.name}")[1]
    headers = {"Authorization": f"Bearer {api_key}"}
    agents = {conv: f"calibrate-{i}" for i, conv in enumerate(sorted(bank_of))}
    written = []
    with httpx.Client(base_url=endpoints["CAIRN_INGEST_URL"], headers=headers, timeout=120) as ingest:
        for conv, entries in bank_of.items():
            configure(endpoints["CAIRN_INGEST_URL"], api_key, agents[conv], {"active_memory": {"mode": "off"}})
            position = _write_bank(ingest, agents[conv], [entry_line(rows[doc]) for doc in entries])
            written.append(Conversation(api_key, agents[conv], position))
    for conversation in written:
        _wait_memory_indexed(endpoints["CAIRN_RECALL_URL"], conversation)
    asked = []
    with httpx.Client(base_url=endpoints["CAIRN_RECALL_URL"], headers=headers, timeout=120) as recall:
        for q in questions:
            conv = q["conv_id"]
            if conv not in bank_of:
                continue
            answer = recall.post("/v1/recall", json=recall_body(agents[conv], q["question"])).raise_for_status().json()
            score, doc = top_of(_trace(recall, answer["trace_id"])["candidates"], bank_of[conv])
            asked.append(Asked(data.name, score, doc in gold[q["question_id"]]))
    return asked


def table(asked: list[Asked]) -> list[dict[str, Any]]:
    """Per dataset and threshold: injections right and wrong, precision, recall, wrong-injection rate."""
    rows = []
    for dataset in dict.fromkeys(a.dataset for a in asked):
        mine = [a for a in asked if a.dataset == dataset]
        for t in THRESHOLDS:
            injected = [a for a in mine if a.top_score is not None and round(a.top_score, 6) >= t]
            right = sum(a.top_is_gold for a in injected)
            wrong = len(injected) - right
            rows.append({"dataset": dataset, "threshold": t, "asked": len(mine), "injected": len(injected),
                         "right": right, "wrong": wrong,
                         "precision": round(right / len(injected), 3) if injected else None,
                         "recall": round(right / len(mine), 3) if mine else None,
                         "wrong_rate": round(wrong / len(injected), 3) if injected else None})  # fmt: skip
    return rows


def suggested(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The lowest threshold whose wrong-injection rate on the first dataset is within WRONG_AT_MOST (with at
    least LEAST_INJECTED injections), and the held-out datasets' figures at it."""
    if not rows:
        return {"min_score": None, "rule": "no questions asked"}
    first = rows[0]["dataset"]
    fitting = [r for r in rows if r["dataset"] == first and r["injected"] >= LEAST_INJECTED
               and r["wrong_rate"] is not None and r["wrong_rate"] <= WRONG_AT_MOST]  # fmt: skip
    rule = (f"lowest threshold with wrong/injected <= {WRONG_AT_MOST} on {first} "
            f"(at least {LEAST_INJECTED} injections)")  # fmt: skip
    if not fitting:
        return {"min_score": None, "rule": rule, "fitted_on": first}
    chosen = min(r["threshold"] for r in fitting)
    held_out = {r["dataset"]: {k: r[k] for k in ("injected", "right", "wrong", "wrong_rate", "recall")}
                for r in rows if r["dataset"] != first and r["threshold"] == chosen}  # fmt: skip
    return {"min_score": chosen, "rule": rule, "fitted_on": first, "held_out": held_out}


def run_calibration(endpoints: dict[str, str], bench: RecallBench) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    asked = [a for data in bench.data for a in ask_dataset(endpoints, data, bench.questions)]
    rows = table(asked)
    return rows, suggested(rows)
