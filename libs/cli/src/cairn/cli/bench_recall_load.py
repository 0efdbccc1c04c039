"""`cairn bench recall`'s load part: lane-1 recalls from `concurrency` concurrent callers (the largest seeded agent,
lane 2 off), first alone, then while `lane2_callers` other callers keep lane 2 busy against a model that hangs.

The hanging model (`bench_recall_hang`) is a second tenant's model override (`PUT /v1/admin/tenants/{id}/llm`;
its host must be on `CAIRN_LLM_ALLOWED_HOSTS`, which `make up` sets to 127.0.0.1 when unset). Its agents run lane 2
on every message (`active_memory.mode: always`) with a short deadline. After three timeouts the breaker of that
tenant + agent + model opens for 60 s and lane 2 is skipped (`circuit_open`): a caller that meets it moves on to
a fresh agent, so model calls keep hanging for the whole phase. Meanwhile `/healthz` of the recall service is
asked every 25 ms: its latency shows whether the event loop stalls.
"""

import asyncio
import contextlib
import itertools
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from cairn.cli.bench import create_tenant
from cairn.cli.bench_memindex import Text, _percentiles
from cairn.cli.bench_recall_calls import RecallBench, outcomes_text, recall_body
from cairn.cli.bench_recall_hang import HangingModel

HEALTH_EVERY_S = 0.025
LANE2_QUESTIONS = (
    "what did we decide about the logo?",
    "我们上次说的方案是什么？",
    "when is my flight again?",
    "我下周有什么安排？",
    "先週話したレストランの名前は何でしたか？",
    "지난번에 말한 회의 시간이 언제였지?",
)
LANE2_STARTED_WITHIN_S = 10.0
RELEASED_WITHIN_S = 5.0


@dataclass
class Phase:
    samples: list[float] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)
    health: list[float] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class Lane2:
    """The callers that keep lane 2 waiting on the hanging model, and what they met."""

    ingest_url: str
    api_key: str
    timeout_ms: int
    outcomes: Counter[str] = field(default_factory=Counter)
    samples: list[float] = field(default_factory=list)
    served: list[float] = field(default_factory=list)  # the service's own `elapsed_ms` of each, in seconds
    agents_used: int = 0
    timeouts: list[str] = field(default_factory=list)  # their trace ids: where did the deadline fall?


async def _probe_health(client: httpx.AsyncClient, stop: asyncio.Event, into: list[float]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        (await client.get("/healthz")).raise_for_status()
        into.append(time.perf_counter() - started)
        await asyncio.sleep(HEALTH_EVERY_S)


async def _lane1_caller(client: httpx.AsyncClient, queries: "asyncio.Queue[str]", phase: Phase) -> None:
    while not queries.empty():
        query = queries.get_nowait()
        started = time.perf_counter()
        answer = (await client.post("/v1/recall", json=recall_body("main", query))).raise_for_status().json()
        phase.samples.append(time.perf_counter() - started)
        phase.outcomes[answer["outcome"]] += 1


async def _new_agent(ingest: httpx.AsyncClient, lane2: Lane2) -> str:
    agent = f"hang-{lane2.agents_used}"
    lane2.agents_used += 1
    config = {"active_memory": {"mode": "always", "timeout_ms": lane2.timeout_ms}}
    (await ingest.put(f"/v1/agents/{agent}/config", json=config)).raise_for_status()
    return agent


async def _lane2_caller(
    recall: httpx.AsyncClient, ingest: httpx.AsyncClient, lane2: Lane2, offset: int, answered: asyncio.Event
) -> None:
    """Asks lane-2 questions until cancelled; a fresh agent whenever the breaker of the current one is open.
    `answered` is set at its first answer."""
    agent = await _new_agent(ingest, lane2)
    for question in itertools.islice(itertools.cycle(LANE2_QUESTIONS), offset, None):
        started = time.perf_counter()
        answer = (await recall.post("/v1/recall", json=recall_body(agent, question))).raise_for_status().json()
        lane2.samples.append(time.perf_counter() - started)
        lane2.served.append(answer["elapsed_ms"] / 1000)
        lane2.outcomes[answer["outcome"]] += 1
        answered.set()
        if answer["outcome"] == "timeout":
            lane2.timeouts.append(answer["trace_id"])
        if answer["outcome"] == "circuit_open":
            agent = await _new_agent(ingest, lane2)


async def _phase(endpoints: dict[str, str], key: str, bench: RecallBench, text: Text, count: int,
                 lane2: Lane2 | None = None, hang: HangingModel | None = None) -> Phase:  # fmt: skip
    recall_url = endpoints["CAIRN_RECALL_URL"]
    limits = httpx.Limits(max_connections=bench.concurrency + bench.lane2_callers + 4)
    async with (
        httpx.AsyncClient(
            base_url=recall_url, headers={"Authorization": f"Bearer {key}"}, timeout=60, limits=limits
        ) as lane1_client,  # fmt: skip
        httpx.AsyncClient(base_url=recall_url, timeout=10) as health_client,
    ):
        background: list[asyncio.Task[None]] = []
        answered: list[asyncio.Event] = []
        if lane2 is not None and hang is not None:
            answered = [asyncio.Event() for _ in range(bench.lane2_callers)]
            background += await _start_lane2(recall_url, lane2, hang, answered)
        phase, stop = Phase(), asyncio.Event()
        probe = asyncio.create_task(_probe_health(health_client, stop, phase.health))
        queries: asyncio.Queue[str] = asyncio.Queue()
        for i in range(count):
            queries.put_nowait(text.queries[i % len(text.queries)])
        started = time.perf_counter()
        await asyncio.gather(*(_lane1_caller(lane1_client, queries, phase) for _ in range(bench.concurrency)))
        phase.seconds = time.perf_counter() - started
        stop.set()
        await probe
        # a lane-1 phase shorter than lane 2's deadline would record no lane-2 answer: each caller's first one is
        # waited for (each is bounded by that deadline)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(bench.lane2_timeout_ms / 1000 + LANE2_STARTED_WITHIN_S):
                await asyncio.gather(*(event.wait() for event in answered))
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
    return phase


async def _start_lane2(
    recall_url: str, lane2: Lane2, hang: HangingModel, answered: list[asyncio.Event]
) -> list[asyncio.Task[None]]:
    """The lane-2 callers as tasks (each with its own clients, closed when it is cancelled), once the first
    model calls are held by the hanging server (bounded wait)."""

    async def caller(offset: int) -> None:
        headers = {"Authorization": f"Bearer {lane2.api_key}"}
        async with (
            httpx.AsyncClient(base_url=recall_url, headers=headers, timeout=60) as recall,
            httpx.AsyncClient(base_url=lane2.ingest_url, headers=headers, timeout=60) as ingest,
        ):
            await _lane2_caller(recall, ingest, lane2, offset, answered[offset])

    callers = len(answered)
    tasks = [asyncio.create_task(caller(i)) for i in range(callers)]
    await asyncio.to_thread(hang.wait_until, lambda: hang.held >= max(1, callers // 2), LANE2_STARTED_WITHIN_S)
    return tasks


def _hanging_tenant(endpoints: dict[str, str], hang: HangingModel) -> str:
    """A second tenant whose model is the hanging server; its API key."""
    tenant, key = create_tenant(endpoints, "bench-recall-hang")
    admin = {"Authorization": f"Bearer {endpoints['CAIRN_ADMIN_TOKEN']}"}
    response = httpx.put(f"{endpoints['CAIRN_INGEST_URL']}/v1/admin/tenants/{tenant}/llm", headers=admin,
                         json={"base_url": hang.base_url, "model": "hangs"}, timeout=30)  # fmt: skip
    if response.status_code == 422:
        raise SystemExit(f"the tenant's model override was refused ({response.json().get('detail')}); start the "
                         "stack with CAIRN_LLM_ALLOWED_HOSTS=127.0.0.1 (make up sets it when unset)")  # fmt: skip
    response.raise_for_status()
    return key


def _row(label: str, phase: Phase, alone: Phase | None) -> dict[str, Any]:
    figures = _percentiles(phase.samples)
    health = _percentiles(phase.health or [0.0])
    row: dict[str, Any] = {"phase": label, **figures, "max_ms": round(max(phase.samples) * 1000, 2)}
    if alone is not None:
        base = _percentiles(alone.samples)
        row["p50_x_alone"] = round(figures["p50_ms"] / base["p50_ms"], 2)
        row["p99_x_alone"] = round(figures["p99_ms"] / base["p99_ms"], 2)
    else:
        row["p50_x_alone"] = row["p99_x_alone"] = 1.0
    return {**row, "recalls_per_s": round(len(phase.samples) / phase.seconds, 1), "healthz_p50_ms": health["p50_ms"],
            "healthz_p99_ms": health["p99_ms"], "healthz_max_ms": round(max(phase.health or [0.0]) * 1000, 2),
            "outcomes": outcomes_text(phase.outcomes)}  # fmt: skip


def where_timeouts_fell(recall_url: str, lane2: Lane2) -> Counter[str]:
    """Where lane 2's timeouts fell, from their traces: while the model was asked (the trace names the model),
    or before lane 2 began (a recall queued behind others on a busy machine uses its deadline up in lane 1);
    a trace the service dropped (its write has a bound of its own) is counted as not stored."""
    headers = {"Authorization": f"Bearer {lane2.api_key}"}
    fell: Counter[str] = Counter()
    with httpx.Client(base_url=recall_url, headers=headers, timeout=60) as recall:
        for trace_id in lane2.timeouts:
            response = recall.get(f"/v1/recall/traces/{trace_id}")
            if response.status_code == 404:
                fell["trace not stored"] += 1
            else:
                fell["in model call" if response.raise_for_status().json()["model"] else "before lane 2"] += 1
    return fell


def _lane2_row(lane2: Lane2, hang: HangingModel, fell: Counter[str]) -> dict[str, Any]:
    figures = _percentiles(lane2.samples or [0.0])
    return {"phase": "lane 2 against the hanging model", "p50_ms": figures["p50_ms"], "p99_ms": figures["p99_ms"],
            "max_ms": round(max(lane2.samples or [0.0]) * 1000, 2), "deadline_ms": lane2.timeout_ms,
            "latest_past_deadline_ms": round(max(lane2.samples or [0.0]) * 1000 - lane2.timeout_ms, 2),
            "served_max_ms": round(max(lane2.served or [0.0]) * 1000, 2), "recalls": len(lane2.samples),
            "outcomes": outcomes_text(lane2.outcomes), "timeouts_fell": outcomes_text(fell),
            "agents": lane2.agents_used,
            "model_calls": hang.requests, "model_calls_closed_by_cairn": hang.disconnects,
            "most_held_at_once": hang.most_held, "still_held_after": hang.held}  # fmt: skip


def run_load(endpoints: dict[str, str], bench: RecallBench, text: Text, key: str) -> list[dict[str, Any]]:
    """Rows: lane 1 alone, lane 1 with lane 2 hanging (ratios to alone), and lane 2's own outcomes."""
    asyncio.run(_phase(endpoints, key, bench, text, bench.concurrency))  # warm-up: caches, connections, the index
    alone = asyncio.run(_phase(endpoints, key, bench, text, bench.load_queries))
    with HangingModel() as hang:
        lane2 = Lane2(endpoints["CAIRN_INGEST_URL"], _hanging_tenant(endpoints, hang), bench.lane2_timeout_ms)
        loaded = asyncio.run(_phase(endpoints, key, bench, text, bench.load_queries, lane2, hang))
        hang.wait_until(lambda: hang.held == 0, RELEASED_WITHIN_S)  # cairn closed the calls it cancelled
        lane2_row = _lane2_row(lane2, hang, where_timeouts_fell(endpoints["CAIRN_RECALL_URL"], lane2))
    callers = f"{bench.concurrency} callers"
    return [
        _row(f"lane 1 alone, {callers}", alone, None),
        _row(f"lane 1, {callers}, lane 2 hanging ({bench.lane2_callers} callers)", loaded, alone),
        lane2_row,
    ]
