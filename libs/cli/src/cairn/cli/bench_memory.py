"""`cairn bench memory`: p50/p99 of memory-document writes and reads, next to a baseline in the same run.

A memory write answers only once consolidation has applied it (the version, or 409), so it costs more
than an accepted message (`POST /v1/messages`, answered at the JetStream ack): the baseline. The ratio
says what waiting for the outcome costs on a machine whose speed drifts. Concurrent appends to one daily
note show that writers of one document queue behind each other rather than fail.
"""

import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from cairn.cli.bench import new_tenant

DOCUMENT = "".join(f"- remembered fact number {n}: 用户喜欢喝茶, prefers window seats\n" for n in range(200))


def _timed(call: Callable[[int], httpx.Response], runs: int, clients: int = 1) -> tuple[list[float], float]:
    """Latencies (ms) of `runs` calls spread over `clients` threads, and the wall time (s) of all of them."""

    def one(i: int) -> float:
        start = time.perf_counter()
        call(i).raise_for_status()
        return (time.perf_counter() - start) * 1000

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        times = list(pool.map(one, range(runs)))
    return times, time.perf_counter() - started


def run_memory(endpoints: dict[str, str], runs: int = 200) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {new_tenant(endpoints, 'bench-memory')}"}
    with httpx.Client(base_url=endpoints["CAIRN_INGEST_URL"], headers=headers, timeout=60) as ingest, \
            httpx.Client(base_url=endpoints["CAIRN_RECALL_URL"], headers=headers, timeout=60) as recall:  # fmt: skip
        version = [0]

        def put(i: int) -> httpx.Response:
            text = f"{DOCUMENT}- edit {i}\n"
            response = ingest.put("/v1/memory/files/MEMORY.md", json={"text": text},
                                  headers={"If-Match": str(version[0])})  # fmt: skip
            version[0] = response.json().get("version") or version[0]
            return response

        cases: list[tuple[str, Callable[[int], httpx.Response], int]] = [
            ("baseline: POST /v1/messages (202)", lambda i: ingest.post("/v1/messages", json={"text": f"m {i}"}), 1),
            ("PUT MEMORY.md, If-Match (applied)", put, 1),
            ("POST /v1/memory/daily (applied)",
             lambda i: ingest.post("/v1/memory/daily", json={"text": f"- note {i}", "date": "2026-01-01"}), 1),
            ("POST /v1/memory/daily, 8 clients",
             lambda i: ingest.post("/v1/memory/daily", json={"text": f"- note {i}", "date": "2026-01-02"}), 8),
            ("GET MEMORY.md window (120 lines)", lambda i: recall.get("/v1/memory/files/MEMORY.md"), 1),
        ]  # fmt: skip
        for _ in range(20):  # warm connections and caches
            ingest.post("/v1/messages", json={"text": "warm-up"}).raise_for_status()
        rows, baseline = [], 0.0
        for name, call, clients in cases:
            times, wall = _timed(call, runs, clients)
            p50, p99 = statistics.median(times), statistics.quantiles(times, n=100)[98]
            baseline = baseline or p50
            rows.append({"case": name, "p50_ms": round(p50, 2), "p99_ms": round(p99, 2),
                         "p50_vs_baseline": round(p50 / baseline, 2), "per_s": round(runs / wall, 1)})  # fmt: skip
        note = recall.get("/v1/memory/files/memory/daily/2026-01-02.md").json()
        if note["version"] != runs:  # every concurrent append applied once
            raise RuntimeError(f"{runs} concurrent appends made version {note['version']}")
    return rows
