"""The search-latency phase's stopwatch: sequential `POST /v1/sessions/search` calls on one keep-alive connection
of the lean client (bench_http), each request's bytes encoded before its timed window.

Until session 17 this phase used httpx, whose own per-request work (~2 ms of CPU here, against ~0.3 ms for the
lean client) sat inside every timed call and took the same two cores as the services it timed: in an interleaved
A/B on the 1M index the largest tenant's searches read ~2 ms slower at p50 and ~2.7 ms at p99 through httpx.
"""

import time
from dataclasses import dataclass

from cairn.cli.bench_http import Client, encode_json

SEARCH_PATH = "/v1/sessions/search"
WARM_UP = 10  # untimed searches first: they open the connection and warm the caches


@dataclass(frozen=True)
class Timed:
    """Each search's client-side time in ms (in the order asked) and the client's CPU over the timed calls."""

    ms: list[float]
    cpu_s: float


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
    cpu = time.process_time()
    for request in requests:
        start = time.perf_counter()
        answer = await client.send(request)
        times.append((time.perf_counter() - start) * 1000)
        answer.raise_for_status()
    return Timed(times, time.process_time() - cpu)
