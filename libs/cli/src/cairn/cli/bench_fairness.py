"""`cairn bench fairness`: tenant fairness under a noisy neighbour. A noisy tenant posts batches as fast as the
API takes them (a closed loop of `connections` requests at once, retrying a 429 at once, as an abusive client
would) while a quiet tenant says `quiet_per_s` single messages a second; each quiet message is searched for with
`consistent_with` its position until found, and the time from its 202 to that answer is its index lag.

Two phases on fresh tenants: with the deployment's default limits, then with the noisy tenant held to
`noisy_limit_per_s` write requests/s (`PUT /v1/admin/tenants/{tenant_id}/limits`). The noisy load runs in a
process of its own, so that its event loop does not delay the quiet tenant's probes."""

import asyncio
import multiprocessing
import statistics
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from cairn.cli.bench import create_tenant
from cairn.cli.bench_http import Client, encode_json

LAG_GIVE_UP_S = 60.0


@dataclass(frozen=True)
class FairnessPlan:
    seconds: float = 30.0
    quiet_per_s: float = 5.0
    connections: int = 8  # noisy requests at once
    batch: int = 100  # messages per noisy request
    noisy_limit_per_s: float = 10.0  # write requests/s of the noisy tenant in the limited phase


@dataclass
class NoisyTally:
    accepted_messages: int = 0
    accepted_requests: int = 0
    refused_requests: int = 0  # 429
    other_failures: int = 0
    last_position: int = 0  # the highest stream position the noisy tenant was given
    run: str = ""


@dataclass
class Phase:
    name: str
    noisy_limit_per_s: float | None
    noisy: NoisyTally = field(default_factory=NoisyTally)
    lags_ms: list[float] = field(default_factory=list)
    drain_s: float = 0.0  # after the window, until the noisy tenant's last message was indexed


def percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def noisy_messages(run: str, first: int, count: int) -> list[dict[str, str]]:
    return [
        {"text": f"noisy {run} message {i} 噪音 {i % 97}", "message_id": f"n{run}-{i}", "peer_id": str(i % 20),
         "channel": "bench"}
        for i in range(first, first + count)
    ]  # fmt: skip


async def _noisy(url: str, key: str, plan: FairnessPlan) -> NoisyTally:
    run = uuid.uuid4().hex[:8]
    tally, client = NoisyTally(run=run), Client(url)
    headers = {"Authorization": f"Bearer {key}"}
    stop, sent = time.monotonic() + plan.seconds, 0

    async def worker() -> None:
        nonlocal sent
        while time.monotonic() < stop:
            first, sent = sent, sent + plan.batch
            messages = noisy_messages(run, first, plan.batch)
            answer = await client.send(client.post("/v1/messages/batch", encode_json({"messages": messages}), headers))
            if answer.status == 202:
                tally.accepted_requests += 1
                accepted = answer.json()
                tally.accepted_messages += int(accepted["accepted"])
                positions = [int(r["position"]) for r in accepted["results"] if "position" in r]
                tally.last_position = max(tally.last_position, *positions)
            elif answer.status == 429:
                tally.refused_requests += 1
            else:
                tally.other_failures += 1

    try:
        await asyncio.gather(*(worker() for _ in range(plan.connections)))
    finally:
        await client.aclose()
    return tally


def _noisy_process(url: str, key: str, plan: FairnessPlan, results: Any) -> None:
    results.put(asdict(asyncio.run(_noisy(url, key, plan))))


async def _quiet(endpoints: dict[str, str], key: str, plan: FairnessPlan) -> list[float]:
    """One message every 1/quiet_per_s s; each lag from its 202 to the search answer that finds it (ms)."""
    ingest, recall = Client(endpoints["CAIRN_INGEST_URL"]), Client(endpoints["CAIRN_RECALL_URL"])
    headers, lags = {"Authorization": f"Bearer {key}"}, []

    async def probe(number: int) -> None:
        word = f"quiet{uuid.uuid4().hex[:10]}n{number}"
        message = {"text": f"{word} a quiet message", "message_id": word, "channel": "probe", "peer_id": "quiet"}
        answer = (await ingest.send(ingest.post("/v1/messages", encode_json(message), headers))).raise_for_status()
        accepted = time.monotonic()
        body = {"query": word, "consistent_with": answer.json()["position"]}
        search = recall.post("/v1/sessions/search", encode_json(body), headers)
        while time.monotonic() - accepted < LAG_GIVE_UP_S:
            if (await recall.send(search)).raise_for_status().json()["results"]:
                lags.append((time.monotonic() - accepted) * 1000)
                return
        lags.append(LAG_GIVE_UP_S * 1000)

    start, tasks = time.monotonic(), []
    try:
        for number in range(int(plan.seconds * plan.quiet_per_s)):
            await asyncio.sleep(max(0.0, start + number / plan.quiet_per_s - time.monotonic()))
            tasks.append(asyncio.create_task(probe(number)))
        await asyncio.gather(*tasks)
    finally:
        await ingest.aclose()
        await recall.aclose()
    return lags


def _limit(endpoints: dict[str, str], tenant_id: str, per_s: float) -> None:
    admin = {"Authorization": f"Bearer {endpoints['CAIRN_ADMIN_TOKEN']}"}
    httpx.put(f"{endpoints['CAIRN_INGEST_URL']}/v1/admin/tenants/{tenant_id}/limits",
              json={"requests_per_s": {"write": per_s}}, headers=admin, timeout=30).raise_for_status()  # fmt: skip


def drained(endpoints: dict[str, str], key: str, tally: NoisyTally) -> float:
    """Seconds until the noisy tenant's last accepted message is indexed (its backlog), so that the next phase
    does not start behind it."""
    started, headers = time.monotonic(), {"Authorization": f"Bearer {key}"}
    body = {"query": tally.run, "consistent_with": str(tally.last_position)}
    with httpx.Client(base_url=endpoints["CAIRN_RECALL_URL"], headers=headers, timeout=30) as recall:
        while time.monotonic() - started < 600:
            if not recall.post("/v1/sessions/search", json=body).raise_for_status().json()["indexing"]:
                break
    return time.monotonic() - started


def run_phase(endpoints: dict[str, str], plan: FairnessPlan, phase: Phase) -> Phase:
    noisy_id, noisy_key = create_tenant(endpoints, f"bench-noisy-{uuid.uuid4().hex[:6]}")
    _, quiet_key = create_tenant(endpoints, f"bench-quiet-{uuid.uuid4().hex[:6]}")
    if phase.noisy_limit_per_s is not None:
        _limit(endpoints, noisy_id, phase.noisy_limit_per_s)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    noisy = context.Process(target=_noisy_process, args=(endpoints["CAIRN_INGEST_URL"], noisy_key, plan, results))
    noisy.start()
    try:
        time.sleep(2.0)  # the noisy process imports and starts hammering before the first quiet message
        phase.lags_ms = asyncio.run(_quiet(endpoints, quiet_key, plan))
        phase.noisy = NoisyTally(**results.get(timeout=plan.seconds + 120))
        phase.drain_s = drained(endpoints, noisy_key, phase.noisy) if phase.noisy.last_position else 0.0
    finally:
        noisy.join(10)
        if noisy.is_alive():
            noisy.kill()
    return phase


def summary(phase: Phase, seconds: float) -> dict[str, Any]:
    lags = phase.lags_ms
    return {
        "phase": phase.name,
        "noisy_limit_write_per_s": phase.noisy_limit_per_s,
        "noisy_accepted_msg_per_s": round(phase.noisy.accepted_messages / seconds, 1),
        "noisy_accepted_requests_per_s": round(phase.noisy.accepted_requests / seconds, 2),
        "noisy_429": phase.noisy.refused_requests,
        "noisy_other_failures": phase.noisy.other_failures,
        "noisy_backlog_drained_s": round(phase.drain_s, 1),
        "quiet_messages": len(lags),
        "quiet_lag_p50_ms": round(percentile(lags, 0.5), 1),
        "quiet_lag_p99_ms": round(percentile(lags, 0.99), 1),
        "quiet_lag_mean_ms": round(statistics.fmean(lags), 1) if lags else 0.0,
        "quiet_lag_p99_under_1s": percentile(lags, 0.99) < 1000,
    }


def run_fairness(endpoints: dict[str, str], plan: FairnessPlan) -> list[dict[str, Any]]:
    rows = []
    for phase in (Phase("default limits", None), Phase("noisy tenant limited", plan.noisy_limit_per_s)):
        print(f"phase: {phase.name} ({plan.seconds:g} s)", flush=True)
        rows.append(summary(run_phase(endpoints, plan, phase), plan.seconds))
        print(rows[-1], flush=True)
    return rows
