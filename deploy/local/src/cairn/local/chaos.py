"""`cairn-local chaos` (`make chaos`): kill -9 each part of a running stack in turn under steady writes and
reads, start it again as the launcher does, and count what an adapter was promised and what was kept.

A fault is a `kill -9` of one process (no shutdown hook runs), an outage (the process stays dead this long:
Postgres and NATS by default for 30 s, a service or Redis for 2 s), then a restart the way `make up` starts a
stopped part, and a wait until every service answers `/readyz` again. The table says, per fault: requests sent,
writes acknowledged (202), acknowledged writes found exactly once in both the transcript and search, those
found more than once, answers 500 (never allowed), answers 503 (an outage's honest answer) and the longest
request. Run it on a stack of its own (`--home`, a fresh folder by default): it kills things.
"""

import asyncio
import itertools
import os
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from cairn.local.chaos_traffic import Ledger, read_steadily, search_hits, settle, transcript_words, write_steadily
from cairn.local.processes import is_running, stop_pid
from cairn.local.stack import SERVICES, LocalStack

SERVERS = ("postgres", "nats", "redis")
FAULTS = (*SERVICES, *SERVERS)
READY_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ChaosPlan:
    faults: Sequence[str] = FAULTS
    outage_s: float = 30.0  # Postgres and NATS
    short_outage_s: float = 2.0  # services and Redis
    steady_s: float = 3.0  # traffic before each kill and after the stack is ready again
    writers: int = 2
    readers: int = 1
    pause_s: float = 0.02


@dataclass(frozen=True)
class FaultRow:
    fault: str
    sent: int
    acknowledged: int
    found: int
    duplicated: int
    errors_500: int
    answered_503: int
    unanswered: int  # connection refused, reset or timed out: what a gateway would turn into a 502 or 504
    longest_ms: float
    ready_again_s: float
    problems: tuple[str, ...] = ()  # the first answers 500, as given


def kill(stack: LocalStack, part: str) -> None:
    """kill -9, as a crash would; Postgres's backends follow their postmaster."""
    pid = stack.postgres.pid() if part == "postgres" else stack.state.pids.get(part)
    if is_running(pid):
        assert pid is not None
        os.kill(pid, 9)
        stop_pid(pid, timeout=10)
    stack.state.pids.pop(part, None)


def restart(stack: LocalStack, part: str) -> None:
    """As `make up` does: start whatever of the stack is not running."""
    if part in SERVERS:
        deadline = time.monotonic() + 60
        while True:  # a killed postmaster's backends may hold its shared memory for a moment
            try:
                stack.start_servers()
                break
            except (subprocess.CalledProcessError, RuntimeError, TimeoutError):  # pg_ctl refused, or no port yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(1.0)
    else:
        stack.start_service(part)


def wait_all_ready(stack: LocalStack) -> float:
    start = time.monotonic()
    for service in SERVICES:
        stack.wait_ready(service, timeout=READY_TIMEOUT_S)
    return time.monotonic() - start


async def _inject(stack: LocalStack, plan: ChaosPlan, ledger: Ledger) -> dict[str, float]:
    ready_again: dict[str, float] = {}
    for fault in plan.faults:
        ledger.phase = fault
        await asyncio.sleep(plan.steady_s)
        await asyncio.to_thread(kill, stack, fault)
        await asyncio.sleep(plan.outage_s if fault in ("postgres", "nats") else plan.short_outage_s)
        restarted = time.monotonic()
        await asyncio.to_thread(restart, stack, fault)
        await asyncio.to_thread(wait_all_ready, stack)
        ready_again[fault] = round(time.monotonic() - restarted, 1)
        await asyncio.sleep(plan.steady_s)
    ledger.phase = "cool-down"
    return ready_again


async def run_chaos(stack: LocalStack, api_key: str, plan: ChaosPlan) -> list[FaultRow]:
    ledger, stop, run = Ledger(), asyncio.Event(), uuid.uuid4().hex[:6]
    headers = {"Authorization": f"Bearer {api_key}"}
    async with (
        httpx.AsyncClient(base_url=stack.url("ingest"), headers=headers) as ingest,
        httpx.AsyncClient(base_url=stack.url("recall"), headers=headers) as recall,
    ):
        counter = itertools.count()
        traffic = [asyncio.create_task(write_steadily(ingest, ledger, run, counter, stop, plan.pause_s))
                   for _ in range(plan.writers)]  # fmt: skip
        traffic += [asyncio.create_task(read_steadily(recall, ledger, stop, plan.pause_s)) for _ in range(plan.readers)]
        try:
            ready_again = await _inject(stack, plan, ledger)
            await asyncio.sleep(plan.steady_s)
        finally:
            stop.set()
            await asyncio.gather(*traffic, return_exceptions=True)
        await settle(recall, ledger, timeout_s=120)
        kept = [a.word for a in ledger.writes if a.status == 202]
        in_transcript, in_search = await transcript_words(recall), await search_hits(recall, kept)
    return [_row(fault, ledger, in_transcript, in_search, ready_again.get(fault, 0.0))
            for fault in (*plan.faults, "cool-down")]  # fmt: skip


def _row(fault: str, ledger: Ledger, transcript: "dict[str, int]", search: "dict[str, int]", ready: float) -> FaultRow:
    writes = [a for a in ledger.writes if a.phase == fault]
    requests = writes + [a for a in ledger.reads if a.phase == fault]
    kept = [a.word for a in writes if a.status == 202]
    return FaultRow(
        fault=fault,
        sent=len(requests),
        acknowledged=len(kept),
        found=sum(1 for w in kept if transcript.get(w) == 1 and search.get(w) == 1),
        duplicated=sum(1 for w in kept if transcript.get(w, 0) > 1 or search.get(w, 0) > 1),
        errors_500=sum(1 for a in requests if a.status >= 500 and a.status != 503),
        answered_503=sum(1 for a in requests if a.status == 503),
        unanswered=sum(1 for a in requests if a.status == 0),
        longest_ms=round(max((a.elapsed_s for a in requests), default=0.0) * 1000, 1),
        ready_again_s=ready,
        problems=tuple(a.problem for a in requests if a.problem)[:3],
    )


def print_table(rows: Sequence[FaultRow]) -> None:
    print(f"{'fault':<14}{'sent':>7}{'acked':>7}{'found':>7}{'lost':>6}{'dup':>5}{'500':>5}{'503':>6}"
          f"{'no answer':>10}{'longest ms':>12}{'ready again s':>15}")  # fmt: skip
    for r in rows:
        lost = r.acknowledged - r.found - r.duplicated
        print(f"{r.fault:<14}{r.sent:>7}{r.acknowledged:>7}{r.found:>7}{lost:>6}{r.duplicated:>5}{r.errors_500:>5}"
              f"{r.answered_503:>6}{r.unanswered:>10}{r.longest_ms:>12}{r.ready_again_s:>15}")  # fmt: skip
    for r in rows:
        for problem in r.problems:
            print(f"500 during {r.fault}: {problem}")


def chaos_stack(home: Path) -> LocalStack:
    """A stack of its own, durable like `make up`'s (Postgres fsyncs): a kill -9 must not lose committed rows."""
    stack = LocalStack(home)
    stack.up()
    return stack
