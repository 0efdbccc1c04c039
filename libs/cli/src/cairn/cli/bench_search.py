"""The search-latency phase's stopwatch: sequential `POST /v1/sessions/search` calls on one keep-alive connection
of the lean client (bench_http), each request's bytes encoded before its timed window.

Until session 17 this phase used httpx, whose own per-request work (~2 ms of CPU here, against ~0.3 ms for the
lean client) sat inside every timed call and took the same two cores as the services it timed: in an interleaved
A/B on the 1M index the largest tenant's searches read ~2 ms slower at p50 and ~2.7 ms at p99 through httpx.

How busy the machine was while the searches ran is reported next to them (`cpu_stall_s`): on the shared two-core
machine the same 200 searches on the same data read a p99 of 38 ms with nothing else running and 89 ms while other
work took ~1.1 cores (session 18, bench31), so a figure is only comparable with the contention it was taken under.
"""

import time
from dataclasses import dataclass
from pathlib import Path

from cairn.cli.bench_http import Client, encode_json

SEARCH_PATH = "/v1/sessions/search"
WARM_UP = 10  # untimed searches first: they open the connection and warm the caches
CPU_PRESSURE = Path("/proc/pressure/cpu")  # Linux PSI: how long some runnable task waited for a CPU, in total


@dataclass(frozen=True)
class Timed:
    """Each search's client-side time in ms (in the order asked), the client's CPU over the timed calls, and the
    seconds in which some task on this machine waited for a CPU meanwhile (None where the kernel does not say)."""

    ms: list[float]
    cpu_s: float
    cpu_stall_s: float | None = None


def cpu_stall_s(pressure: Path = CPU_PRESSURE) -> float | None:
    """The machine's total time with some runnable task waiting for a CPU (PSI's `some total=`, in µs), in seconds;
    None without PSI (not Linux, or a kernel without it)."""
    try:
        some = pressure.read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    fields = dict(part.split("=", 1) for part in some.split()[1:] if "=" in part)
    return int(fields["total"]) / 1e6 if "total" in fields else None


def stall_share(stall_s: float | None, ms: list[float]) -> float | None:
    """The share of the timed calls' time in which some task on this machine waited for a CPU: it grows with the
    work that competes with the searches for the cores (bench31: 0.18-0.44 while other work took ~1 of 2 cores)."""
    return round(stall_s / (sum(ms) / 1000), 3) if stall_s is not None and ms and sum(ms) > 0 else None


def search_request(client: Client, query: str, key: str) -> bytes:
    """The bytes of one search as the bench asks it: every agent's sessions of the tenant (visibility all)."""
    body = encode_json({"query": query, "visibility": "all"})
    return client.post(SEARCH_PATH, body, {"Authorization": f"Bearer {key}"})


async def time_searches(client: Client, queries: list[str], key: str) -> Timed:
    """Ask `queries` one after another (after WARM_UP of them untimed); a non-2xx answer fails the run."""
    requests = [search_request(client, query, key) for query in queries]
    for request in requests[:WARM_UP]:
        (await client.send(request)).raise_for_status()
    times: list[float] = []
    cpu, stalled = time.process_time(), cpu_stall_s()
    for request in requests:
        start = time.perf_counter()
        answer = await client.send(request)
        times.append((time.perf_counter() - start) * 1000)
        answer.raise_for_status()
    stalled_after = cpu_stall_s()
    stall = stalled_after - stalled if stalled is not None and stalled_after is not None else None
    return Timed(times, time.process_time() - cpu, stall)
