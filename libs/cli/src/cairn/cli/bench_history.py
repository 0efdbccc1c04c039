"""`cairn bench history`: p50/p99 of `GET /v1/sessions/{key}/history` on a 10,000-message session,
next to a baseline in the same run (an authenticated one-query read: the file listing), so the ratio
says what history itself costs on a machine whose speed drifts."""

import random
import statistics
import time
import uuid
from typing import Any

import httpx

from cairn.cli.bench import new_tenant

WORDS = [
    "we",
    "met",
    "in",
    "Lisbon",
    "on",
    "Tuesday",
    "the",
    "parcel",
    "slides",
    "launch",
    "budget",
    "下周二我去上海参加产品发布会",
]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.choice([5, 12, 30, 80, 200])))


def _message(rng: random.Random, key: str, i: int) -> dict[str, str]:
    role = "assistant" if i % 2 else "user"
    return {"text": _text(rng), "role": role, "message_id": f"{key}-{i}", "session_key": key, "channel": "bench"}


def _fill(ingest: httpx.Client, recall: httpx.Client, key: str, messages: int) -> None:
    rng = random.Random(7)
    for first in range(0, messages, 1000):
        batch = [_message(rng, key, i) for i in range(first, min(first + 1000, messages))]
        ingest.post("/v1/messages/batch", json={"messages": batch}).raise_for_status()
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        page = recall.get(f"/v1/sessions/{key}/history", params={"limit": 1})
        if page.status_code == 200 and page.json()["messages"][-1]["position"] >= messages:
            return
        time.sleep(0.5)
    raise TimeoutError("the session was not filled within 15 minutes")


def _timed(recall: httpx.Client, url: str, params: dict[str, Any], runs: int) -> list[float]:
    for _ in range(20):
        recall.get(url, params=params).raise_for_status()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        recall.get(url, params=params).raise_for_status()
        times.append((time.perf_counter() - start) * 1000)
    return times


def run_history(endpoints: dict[str, str], messages: int, runs: int = 300) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {new_tenant(endpoints, 'bench-history')}"}
    key = f"agent:main:bench:direct:{uuid.uuid4().hex[:8]}"
    cases: list[tuple[str, str, dict[str, Any]]] = [
        ("baseline: GET /v1/memory/files", "/v1/memory/files", {}),
        ("history, latest 50", f"/v1/sessions/{key}/history", {}),
        ("history, latest 200", f"/v1/sessions/{key}/history", {"limit": 200}),
        ("history, oldest page (offset n-50)", f"/v1/sessions/{key}/history", {"offset": messages - 50}),
        ("history, window by message_id", f"/v1/sessions/{key}/history", {"message_id": f"{key}-{messages // 2}"}),
    ]
    with httpx.Client(base_url=endpoints["CAIRN_INGEST_URL"], headers=headers, timeout=120) as ingest, \
            httpx.Client(base_url=endpoints["CAIRN_RECALL_URL"], headers=headers, timeout=120) as recall:  # fmt: skip
        _fill(ingest, recall, key, messages)
        rows, baseline = [], 0.0
        for name, url, params in cases:
            times = _timed(recall, url, params, runs)
            p50, p99 = statistics.median(times), statistics.quantiles(times, n=100)[98]
            baseline = baseline or p50
            rows.append({"case": name, "p50_ms": round(p50, 2), "p99_ms": round(p99, 2),
                         "p50_vs_baseline": round(p50 / baseline, 2), "session_messages": messages})  # fmt: skip
    return rows
