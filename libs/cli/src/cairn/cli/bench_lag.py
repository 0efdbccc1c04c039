"""The index-lag phase of `cairn bench load`: an open-loop load at an asked rate, posted from worker processes,
while a process of its own probes accepted → visible to search.

Posting the load from the bench's own event loop (as before) reached ~27 % of the end-to-end rate instead of the
asked 50 %: one Python process could not issue and parse that many requests, they queued in its client, and the
probes shared its GIL. Here each worker process has its own HTTP client and paces its share of the rate by a fixed
schedule (it never waits for an answer before sending the next request), and the probes get a process too. The
pacing and the accounting are pure functions below, unit-tested without clocks.

The workers post with the lean client of bench_http, their requests generated and encoded before the window: with
httpx each request took ~2.5-4 ms of a worker's CPU on this 2-core machine, the workers fell seconds behind the
schedule and counted their own queueing as the API's answer time.
"""

import asyncio
import itertools
import multiprocessing
import random
import time
import traceback
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.synchronize import Barrier
from queue import Empty
from typing import Any

from cairn.cli.bench_http import Answer, Client, encode_json
from cairn.cli.chatgen import Chat, Traffic

# Messages per load request by default: the throughput phase's request size, so that half its message rate is half
# its requests too. In requests of 5 (`--lag-batch 5`, a live chat's trickle) the same message rate asks the API for
# twice the requests/s the throughput phase sustained, and ingest's cost per request, not the index, bounds it.
REQUEST_MESSAGES = 20
BATCH_PATH = "/v1/messages/batch"
PROBE_GAP_S = 0.25  # a probe every 125–375 ms
CONNECTIONS = 64  # per load worker
SHORT = 0.10  # the table flags an accepted rate more than this far below the asked one
READY_TIMEOUT_S = 120.0  # spawning a worker imports cairn: seconds on a busy machine


@dataclass(frozen=True)
class LagPlan:
    """What one run of the phase asks: the rate, the window, how many load processes, the traffic's shape."""

    endpoints: dict[str, str]
    keys: tuple[str, ...]  # every tenant's API key, by Zipf rank
    rate: float  # messages/s over all workers
    seconds: float
    workers: int
    seed: int
    zipf: float
    batch: int = REQUEST_MESSAGES  # messages per load request


@dataclass
class Tally:
    """One worker's account of its window: what it sent, what was accepted before the window closed."""

    sent: int = 0  # messages in requests sent inside the window
    accepted_in_window: int = 0  # messages whose 202 came back before the window closed
    accepted: int = 0  # all messages accepted, the ones answered after the window too
    behind_ms: list[float] = field(default_factory=list)  # how late each request left against its schedule (client)
    answer_ms: list[float] = field(default_factory=list)  # from leaving to its 202 (the API, and the wire)
    tenants: dict[int, tuple[int, int]] = field(default_factory=dict)  # rank -> (messages posted, highest position)
    cpu_s: float = 0.0  # the sender process's CPU from the window's start to its last answer: the bench's own cost

    def leave(self, messages: int, due: float, left: float, stop: float) -> None:
        self.behind_ms.append(max(0.0, left - due) * 1000)
        if left < stop:
            self.sent += messages

    def record(self, rank: int, positions: list[int], answered: float, stop: float) -> None:
        self.accepted += len(positions)
        if answered < stop:
            self.accepted_in_window += len(positions)
        posted, highest = self.tenants.get(rank, (0, 0))
        self.tenants[rank] = (posted + len(positions), max(highest, *positions))


def schedule(
    rate: float, workers: int, worker: int, start: float, stop: float, batch: int = REQUEST_MESSAGES
) -> Iterator[float]:
    """When `worker` of `workers` sends each request of `batch` messages so that together they post `rate`
    messages/s from `start` until `stop`: each every `workers` request intervals, staggered by one interval, so the
    sum is evenly spaced."""
    interval = batch * workers / rate
    sends = 0
    while (due := start + interval * (sends + worker / workers)) < stop:  # not a running sum: no drift past stop
        yield due
        sends += 1


def merge(tallies: list[Tally]) -> Tally:
    """The workers' tallies as one (their tenants overlap: all draw from every tenant by Zipf share)."""
    total = Tally()
    for tally in tallies:
        total.sent += tally.sent
        total.accepted_in_window += tally.accepted_in_window
        total.accepted += tally.accepted
        total.cpu_s += tally.cpu_s
        total.behind_ms += tally.behind_ms
        total.answer_ms += tally.answer_ms
        for rank, (posted, highest) in tally.tenants.items():
            before, top = total.tenants.get(rank, (0, 0))
            total.tenants[rank] = (before + posted, max(top, highest))
    return total


def short_of_asked(asked: float, accepted: float) -> bool:
    """Whether the accepted rate falls more than SHORT below the asked one (the lag then was not measured at it)."""
    return accepted < (1 - SHORT) * asked


@dataclass(frozen=True)
class Posting:
    """One load request as it goes on the wire, encoded before the timed window, and whose messages it holds."""

    tenant: int  # rank
    messages: int
    wire: bytes


def postings(client: Client, keys: tuple[str, ...], chats: Iterator[Chat]) -> Iterator[Posting]:
    """Each chat as a `/v1/messages/batch` request of its tenant, the body as httpx encoded `json=`."""
    for chat in chats:
        body = encode_json({"messages": chat.messages})
        wire = client.post(BATCH_PATH, body, {"Authorization": f"Bearer {keys[chat.tenant]}"})
        yield Posting(chat.tenant, len(chat.messages), wire)


def positions(answer: Answer) -> list[int]:
    """The positions a `/v1/messages/batch` answer gave its messages (raises on anything but 2xx)."""
    return [int(r["position"]) for r in answer.raise_for_status().json()["results"]]


async def post_load(plan: LagPlan, worker: int, ready: Barrier) -> Tally:
    """Post this worker's share of the rate for the window once every process is `ready`, open loop; wait for
    every answer.

    Everything that is not the send itself happens before the window: the schedule's requests are generated and
    encoded (the same traffic as generating each just before its send), so the loop's CPU in the window is the
    lean client's write and parse (bench_http), and a busy machine delays the sends as little as it can."""
    tally = Tally()
    traffic = Traffic(len(plan.keys), plan.seed + 1 + worker, plan.zipf, run=f"lag{worker}")
    offsets = list(schedule(plan.rate, plan.workers, worker, 0.0, plan.seconds, plan.batch))
    ingest = Client(plan.endpoints["CAIRN_INGEST_URL"])
    load = list(itertools.islice(postings(ingest, plan.keys, traffic.requests(plan.batch)), len(offsets)))
    # Requests wait for a connection here, and the wait counts as behind schedule: when the API answers slowly,
    # the output says so.
    connections = asyncio.Semaphore(CONNECTIONS)

    async def post(posting: Posting, due: float) -> None:
        async with connections:
            left = time.monotonic()
            tally.leave(posting.messages, due, left, stop)
            answer = await ingest.send(posting.wire)
        answered = time.monotonic()
        tally.answer_ms.append((answered - left) * 1000)
        tally.record(posting.tenant, positions(answer), answered, stop)

    try:
        start, cpu = started(ready), time.process_time()
        stop, sent = start + plan.seconds, []
        for offset, posting in zip(offsets, load, strict=True):
            due = start + offset
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            sent.append(asyncio.create_task(post(posting, due)))
        await asyncio.gather(*sent)
        tally.cpu_s = time.process_time() - cpu
    finally:
        await ingest.aclose()
    return tally


async def probe_lags(plan: LagPlan, probes: list[tuple[int, str]], ready: Barrier) -> list[float]:
    """Probe for the window once every process is `ready` (every 125–375 ms); each lag in ms, 60 s for a probe
    never found.

    A probe is a message with a unique word, searched for with `consistent_with` its position (read-your-writes:
    recall waits until the index has it). The lag runs from the probe's 202 to the answer that finds it, so it
    includes one search and recall's polling of the index position: an upper bound of accepted → visible. The
    probes go through the lean client too: what an HTTP client spends of a busy machine's CPU between the 202 and
    the search would be counted as lag."""
    rng, lags = random.Random(plan.seed), []
    ingest, recall = Client(plan.endpoints["CAIRN_INGEST_URL"]), Client(plan.endpoints["CAIRN_RECALL_URL"])

    async def probe(number: int, rank: int, text: str) -> None:
        headers = {"Authorization": f"Bearer {plan.keys[rank]}"}
        word = f"lagprobe{uuid.uuid4().hex[:10]}n{number}"
        message = {"text": f"{word} {text}", "message_id": word, "channel": "probe", "peer_id": "prober"}
        written = ingest.post("/v1/messages", encode_json(message), headers)
        answer = await ingest.send(written)
        accepted = time.monotonic()
        body = {"query": word, "visibility": "all", "consistent_with": answer.raise_for_status().json()["position"]}
        search = recall.post("/v1/sessions/search", encode_json(body), headers)
        while time.monotonic() - accepted < 60:
            if (await recall.send(search)).raise_for_status().json()["results"]:
                lags.append((time.monotonic() - accepted) * 1000)
                return
        lags.append(60_000.0)

    try:
        stop = started(ready) + plan.seconds
        tasks = []
        for number, (rank, text) in enumerate(probes):
            if time.monotonic() >= stop:
                break
            tasks.append(asyncio.create_task(probe(number, rank, text)))
            await asyncio.sleep(PROBE_GAP_S * (0.5 + rng.random()))
        await asyncio.gather(*tasks)
    finally:
        await ingest.aclose()
        await recall.aclose()
    return lags


def started(ready: Barrier) -> float:
    """Wait until every process of the phase has built its clients, then the window's start (monotonic, which is
    one clock for all processes). Blocks the loop on purpose: nothing else is running yet."""
    ready.wait(READY_TIMEOUT_S)
    return time.monotonic()


def _process(role: int, plan: LagPlan, probes: list[tuple[int, str]], ready: Barrier, results: Any) -> None:
    """One process of the phase: role -1 probes, 0..workers-1 post load, all from the same start (the barrier);
    a failure is sent back with its traceback and re-raised."""
    try:
        work = probe_lags(plan, probes, ready) if role < 0 else post_load(plan, role, ready)
        results.put((role, asyncio.run(work), None))
    except BaseException:
        results.put((role, None, traceback.format_exc()))
        raise


def run_phase(plan: LagPlan, probes: list[tuple[int, str]]) -> tuple[list[float], Tally]:
    """Run the load workers and the probe process through one window; the probes' lags and the load's tally."""
    context = multiprocessing.get_context("spawn")  # not fork: the caller's event loop and clients stay behind
    ready, results = context.Barrier(plan.workers + 2), context.Queue()
    roles = [-1, *range(plan.workers)]
    processes = [context.Process(target=_process, args=(r, plan, probes, ready, results)) for r in roles]
    for process in processes:
        process.start()
    try:
        ready.wait(READY_TIMEOUT_S)
        answers: dict[int, Any] = {}
        while len(answers) < len(roles):
            role, answer, failure = results.get(timeout=plan.seconds + 240)
            if failure:
                raise RuntimeError(f"lag phase process {role} failed:\n{failure}")
            answers[role] = answer
    except Empty as timeout:
        raise RuntimeError("a lag phase process gave no answer (see its traceback above)") from timeout
    finally:
        for process in processes:
            process.join(10)
            if process.is_alive():
                process.kill()
    return answers[-1], merge([answers[w] for w in range(plan.workers)])
