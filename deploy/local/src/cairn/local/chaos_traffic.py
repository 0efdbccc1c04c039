"""The steady traffic of `cairn-local chaos` and what it checks afterwards.

Writers post messages one at a time, each with a unique word as its `message_id` and in its text; readers
search meanwhile. Every request is recorded under the fault that was running when it was sent. Afterwards
every acknowledged (202) message is looked for in its transcript (history) and in session search: found
once is kept, missing is lost, more than once is duplicated.
"""

import asyncio
import itertools
import random
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

SESSION_KEY = "agent:main:main"  # direct messages under the default dm_scope all land here
REQUEST_TIMEOUT_S = 60.0  # far past any bound: a request that takes this long is a hang, and is reported
SEARCH_LIMIT = 25


@dataclass
class Attempt:
    phase: str
    word: str
    status: int  # 0: no answer (connection refused, reset or timed out)
    elapsed_s: float
    position: int | None = None
    problem: str | None = None  # the body of an answer 500: what a person would need to find the cause


@dataclass
class Ledger:
    """Every request of the run, by the fault running when it was sent."""

    phase: str = "start"
    writes: list[Attempt] = field(default_factory=list)
    reads: list[Attempt] = field(default_factory=list)


def _word(n: int, run: str) -> str:
    return f"chaos{run}w{n}"  # one token to the tokenizer: letters and digits, no stem to strip


async def write_steadily(client: httpx.AsyncClient, ledger: Ledger, run: str, counter: "itertools.count[int]",
                         stop: asyncio.Event, pause_s: float) -> None:  # fmt: skip
    while not stop.is_set():
        word, phase = _word(next(counter), run), ledger.phase
        body = {"channel": "chaos", "peer_id": "p1", "text": f"steady write {word}", "message_id": word}
        start = time.perf_counter()
        try:
            answer = await client.post("/v1/messages", json=body, timeout=REQUEST_TIMEOUT_S)
            status = answer.status_code
            position = int(answer.json()["position"]) if status == 202 else None
            problem = answer.text[:500] if status >= 500 and status != 503 else None
        except httpx.HTTPError:
            status, position, problem = 0, None, None
        ledger.writes.append(Attempt(phase, word, status, time.perf_counter() - start, position, problem))
        await asyncio.sleep(pause_s)


async def read_steadily(client: httpx.AsyncClient, ledger: Ledger, stop: asyncio.Event, pause_s: float) -> None:
    while not stop.is_set():
        kept = [a.word for a in ledger.writes[-200:] if a.status == 202]
        query, phase = (random.choice(kept) if kept else "steady"), ledger.phase
        start = time.perf_counter()
        try:
            answer = await client.post("/v1/sessions/search", json={"query": query}, timeout=REQUEST_TIMEOUT_S)
            status = answer.status_code
            problem = answer.text[:500] if status >= 500 and status != 503 else None
        except httpx.HTTPError:
            status, problem = 0, None
        ledger.reads.append(Attempt(phase, query, status, time.perf_counter() - start, problem=problem))
        await asyncio.sleep(pause_s)


async def settle(recall: httpx.AsyncClient, ledger: Ledger, timeout_s: float) -> bool:
    """Wait until search has indexed the last acknowledged write (read-your-writes on its position)."""
    positions = [a.position for a in ledger.writes if a.position is not None]
    if not positions:
        return True
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            answer = await recall.post(
                "/v1/sessions/search", json={"query": "steady", "consistent_with": str(max(positions))}, timeout=10
            )
            if answer.status_code == 200 and not answer.json()["indexing"]:
                return True
        except httpx.HTTPError:
            pass
        await asyncio.sleep(1.0)
    return False


async def transcript_words(recall: httpx.AsyncClient) -> Counter[str]:
    """How often each word stands in the session's transcript, read back page by page."""
    seen: Counter[str] = Counter()
    offset: int | None = 0
    while offset is not None:
        answer = await recall.get(
            f"/v1/sessions/{SESSION_KEY}/history", params={"limit": 200, "offset": offset}, timeout=30
        )
        if answer.status_code == 404:
            return seen
        answer.raise_for_status()
        page = answer.json()
        seen.update(m["text"].rsplit(" ", 1)[-1] for m in page["messages"])
        offset = page["next_offset"] if page["has_more"] else None
    return seen


async def search_hits(recall: httpx.AsyncClient, words: list[str], concurrency: int = 4) -> Counter[str]:
    """How many search results carry each word."""
    hits: Counter[str] = Counter()
    gate = asyncio.Semaphore(concurrency)

    async def one(word: str) -> None:
        async with gate:
            answer = await recall.post("/v1/sessions/search", json={"query": word, "limit": SEARCH_LIMIT}, timeout=30)
            answer.raise_for_status()
            hits[word] = sum(1 for r in answer.json()["results"] if word in r["snippet"])

    await asyncio.gather(*(one(w) for w in words))
    return hits
