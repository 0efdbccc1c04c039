"""`cairn bench recall`: how fast `POST /v1/recall` answers and what it injects (issue 29, "Proof"). Three parts:

- `lane1`: p50/p99 of one caller's recalls for agents holding 20 (the baseline, reported as ratios too) and
  10,000 and 100,000 trusted entries: `memory/bank/` chunks seeded directly in SQL by `bench_memindex`
  (`_seeded_key`; `--keep-seed` reuses them across runs), lane 2 off (`active_memory.mode: off`). Every
  request comes from a session of its own, so the 15 s result cache (per session + query) never answers.
  The traces' `timings_ms` split the service's own time: lane 1's memory search against the rest.
- `load`: the same lane-1 recalls from 50 concurrent callers, alone and then while other callers keep lane 2
  busy against a model that never answers (`bench_recall_load`).
- `datasets`: the shared datasets' questions as recall inputs (`bench_recall_data`).
- `calibrate`: lane 1's `min_score` read off the datasets: each question's gold turns as trusted bank entries
  among distractors, precision and recall of the top candidate per threshold (`bench_recall_calibrate`).
"""

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from cairn.cli.bench import print_rows, read_endpoints, write_json
from cairn.cli.bench_memindex import Text, _percentiles, _seeded_key, synthetic_text
from cairn.cli.bench_recall_calibrate import run_calibration
from cairn.cli.bench_recall_calls import RecallBench, configure, outcomes_text, recall_body
from cairn.cli.bench_recall_data import run_datasets
from cairn.cli.bench_recall_load import run_load
from cairn.cli.endpoints import postgres_as

BASELINE_ENTRIES = 20
WARM_UP = 3
LANE2_OFF = {"active_memory": {"mode": "off"}}


@dataclass(frozen=True)
class Seeded:
    label: str
    entries: int
    api_key: str
    how: str


@dataclass
class Timed:
    """One run of recalls: client-side latencies (s), outcomes, and the trace ids to read the server's side."""

    samples: list[float] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)
    trace_ids: list[str] = field(default_factory=list)


def seeded_agents(endpoints: dict[str, str], sizes: tuple[int, ...], text: Text, keep: Path | None) -> list[Seeded]:
    """The baseline and one agent `main` per size, holding that many trusted entries, lane 2 off."""
    owner_url = postgres_as(endpoints, "cairn_owner")
    agents = []
    for size in (BASELINE_ENTRIES, *sizes):
        key, how = _seeded_key(endpoints, owner_url, size, text, keep)
        configure(endpoints["CAIRN_INGEST_URL"], key, "main", LANE2_OFF)
        label = f"baseline: {size} entries" if size == BASELINE_ENTRIES else f"{size:,} entries"
        agents.append(Seeded(label, size, key, how))
    return agents


def time_recalls(recall: httpx.Client, agents: list[Seeded], queries: list[str]) -> list[Timed]:
    """Each query asked of every agent in turn, so a change of the machine's load (it is shared) falls on all
    sizes alike rather than on whichever ran at the time."""
    keys = [{"Authorization": f"Bearer {agent.api_key}"} for agent in agents]
    for query in queries[:WARM_UP]:
        for headers in keys:
            recall.post("/v1/recall", json=recall_body("main", query), headers=headers).raise_for_status()
    timed = [Timed() for _ in agents]
    for query in queries:
        for headers, into in zip(keys, timed, strict=True):
            started = time.perf_counter()
            response = recall.post("/v1/recall", json=recall_body("main", query), headers=headers)
            into.samples.append(time.perf_counter() - started)
            answer = response.raise_for_status().json()
            into.outcomes[answer["outcome"]] += 1
            into.trace_ids.append(answer["trace_id"])
    return timed


def trace_timings(recall: httpx.Client, api_key: str, trace_ids: list[str]) -> dict[str, list[float]]:
    """The traces' `timings_ms` by part (`lane1`, `lane2`, `total`), in seconds; a trace not stored is left out."""
    parts: dict[str, list[float]] = {}
    for trace_id in trace_ids:
        response = recall.get(f"/v1/recall/traces/{trace_id}", headers={"Authorization": f"Bearer {api_key}"})
        if response.status_code == 404:
            continue
        for name, ms in response.raise_for_status().json()["timings_ms"].items():
            parts.setdefault(name, []).append(ms / 1000)
    return parts


def run_lane1(endpoints: dict[str, str], agents: list[Seeded], text: Text) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with httpx.Client(base_url=endpoints["CAIRN_RECALL_URL"], timeout=60) as recall:
        runs = time_recalls(recall, agents, text.queries)
        servers = [trace_timings(recall, a.api_key, run.trace_ids) for a, run in zip(agents, runs, strict=True)]
    for agent, timed, server in zip(agents, runs, servers, strict=True):
        client = _percentiles(timed.samples)
        base = rows[0] if rows else client
        row = {"agent": agent.label, **client, "p50_x_baseline": round(client["p50_ms"] / base["p50_ms"], 2),
               "p99_x_baseline": round(client["p99_ms"] / base["p99_ms"], 2)}  # fmt: skip
        for part in ("total", "lane1"):
            figures = _percentiles(server.get(part, [0.0]))
            row[f"server_{part}_p50_ms"], row[f"server_{part}_p99_ms"] = figures["p50_ms"], figures["p99_ms"]
        rows.append({**row, "queries": len(timed.samples), "outcomes": outcomes_text(timed.outcomes),
                     "seed": agent.how})  # fmt: skip
    return rows


def run_recall_bench(endpoints: dict[str, str], bench: RecallBench) -> dict[str, Any]:
    """Every asked part, its table printed as it ends; the whole result (for the JSON file)."""
    text = synthetic_text(random.Random(11), bench.queries)
    result: dict[str, Any] = {"settings": {k: str(v) for k, v in bench.__dict__.items()}}
    timed = {"lane1", "load"} & set(bench.parts)
    agents = seeded_agents(endpoints, bench.sizes, text, bench.keep_seed) if timed else []
    if "lane1" in bench.parts:
        result["lane1"] = run_lane1(endpoints, agents, text)
        _show("lane 1, one caller, lane 2 off (latency through HTTP; server_* from the traces)", result["lane1"])
    if "load" in bench.parts:
        result["load"] = run_load(endpoints, bench, text, agents[-1].api_key)
        _show(f"lane 1 of the {agents[-1].label} agent under load, alone and with lane 2 hanging", result["load"])
    if "datasets" in bench.parts:
        result["datasets"] = run_datasets(endpoints, bench)
        _show("dataset questions as recall inputs (lane 2: the extractive stand-in, no model)", result["datasets"])
    if "calibrate" in bench.parts:
        result["calibrate"], result["suggested_min_score"] = run_calibration(endpoints, bench)
        _show("lane 1's top candidate per min_score threshold (gold turns among distractors)", result["calibrate"])
        print(f"\nsuggested min_score: {result['suggested_min_score']}")
    return result


def _show(title: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n{title}")
    if rows:
        print_rows(rows)


def main(endpoints_file: Path, bench: RecallBench, out: Path) -> None:
    result = run_recall_bench(read_endpoints(endpoints_file), bench)
    write_json(out, {"benchmark": "recall", **result})
