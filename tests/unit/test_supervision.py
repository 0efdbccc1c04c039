"""Supervision with fake tasks: a task that raises is restarted with backoff and reported not ready while
it fails; a crash loop of non-transient errors makes the process not live, a dependency that stays down never
does; a run that lasts ends the crash loop; cancellation stops it for good."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest

from cairn.delivery.faults import Backoff
from cairn.delivery.settings import SupervisionSettings
from cairn.delivery.supervision import Health, Restarts, supervise

QUICK = Restarts(Backoff(first_s=0.001, cap_s=0.005), settle_s=30.0)
SETTINGS = SupervisionSettings(stalled_after_s=10.0, busy_limit_s=300.0, give_up_after=3)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FlakyTask:
    """Raises `errors` in turn, one per run, then runs until cancelled."""

    def __init__(self, errors: list[BaseException]) -> None:
        self.errors, self.runs = list(errors), 0
        self.running = asyncio.Event()

    async def run(self) -> None:
        self.runs += 1
        if self.errors:
            raise self.errors.pop(0)
        self.running.set()
        await asyncio.Event().wait()


async def until(check: Callable[[], bool], within: float = 5.0, interval: float = 0.001) -> bool:
    """Bounded poll of a condition on the fakes."""
    for _ in range(int(within / interval)):
        if check():
            return True
        await asyncio.sleep(interval)
    return check()


@contextlib.asynccontextmanager
async def supervising(
    task: FlakyTask, health: Health, restarts: Restarts = QUICK
) -> AsyncIterator["asyncio.Task[None]"]:
    running = asyncio.create_task(supervise(task.run, health, restarts))
    try:
        yield running
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


async def test_a_task_that_raises_is_restarted_until_it_runs() -> None:
    task, health = FlakyTask([RuntimeError("bad row"), TypeError("naive vs aware")]), Health("worker")
    async with supervising(task, health) as supervisor:
        assert await until(task.running.is_set)
        assert task.runs == 3
        assert not supervisor.done()
        assert health.crashes_in_row == 2
        assert health.reason == "TypeError: naive vs aware"


async def test_a_crashed_task_is_reported_not_ready_at_once_and_ready_once_its_run_settles() -> None:
    clock = Clock()
    health = Health("worker", clock)
    assert health.problem(SETTINGS) is None
    health.crash(RuntimeError("bad row"))
    problem = health.problem(SETTINGS)
    assert problem is not None
    assert "restarting after a crash" in problem
    assert "RuntimeError: bad row" in problem
    health.settled()  # the restarted run lasted `settle_s`
    assert health.problem(SETTINGS) is None
    assert health.crashes_in_row == 0


async def test_readiness_reports_a_restarting_task_through_the_supervisor() -> None:
    """The supervisor's own bookkeeping: not ready while the task keeps failing, ready once it has run long
    enough (settle_s) after its last restart."""
    task, health = FlakyTask([RuntimeError("bad row")]), Health("worker")
    async with supervising(task, health, Restarts(QUICK.backoff, settle_s=0.2)):
        assert await until(task.running.is_set)
        assert health.problem(SETTINGS) is not None, "restarted, but not settled yet"
        assert await until(lambda: health.problem(SETTINGS) is None)
        assert health.crashes_in_row == 0


async def test_a_crash_loop_makes_the_process_not_live() -> None:
    errors: list[BaseException] = [RuntimeError(f"crash {n}") for n in range(3)]
    task, health = FlakyTask(errors), Health("worker")
    assert health.live(SETTINGS)
    async with supervising(task, health):
        assert await until(task.running.is_set)
    assert health.crashes_in_row == 3
    assert not health.live(SETTINGS), "restarting it in-process did not help: a new process is the next remedy"


async def test_a_dependency_that_stays_down_never_makes_the_process_not_live() -> None:
    errors: list[BaseException] = [ConnectionRefusedError(111, "Postgres is down") for _ in range(10)]
    task, health = FlakyTask(errors), Health("worker")
    async with supervising(task, health):
        assert await until(task.running.is_set)
    assert task.runs == 11
    assert health.crashes_in_row == 0
    assert health.live(SETTINGS), "a new process would find Postgres down just the same"
    assert health.problem(SETTINGS) is not None, "but it is not ready until it has run long enough"


async def test_a_task_that_finishes_is_not_restarted() -> None:
    runs = 0

    async def once() -> None:
        nonlocal runs
        runs += 1

    health = Health("listener")
    await asyncio.wait_for(supervise(once, health, QUICK), 5)
    assert runs == 1
    assert health.problem(SETTINGS) is None


async def test_cancelling_the_supervisor_stops_the_task_for_good() -> None:
    task, health = FlakyTask([]), Health("worker")
    async with supervising(task, health) as supervisor:
        assert await until(task.running.is_set)
    assert supervisor.cancelled()
    await asyncio.sleep(0.02)
    assert task.runs == 1


def test_a_failure_retried_in_place_is_reported_only_once_it_lasts() -> None:
    """A serialization failure retried at once must not flap readiness; Postgres away for longer must show."""
    clock = Clock()
    health = Health("session-p3@CAIRN_INGEST", clock)
    health.failing(ConnectionRefusedError(111, "Connection refused"))
    clock.now += 9.0
    assert health.problem(SETTINGS) is None
    clock.now += 1.0
    assert health.problem(SETTINGS) == "retrying for 10s: ConnectionRefusedError: [Errno 111] Connection refused"
    health.progressed()
    assert health.problem(SETTINGS) is None
    assert health.live(SETTINGS)


def test_work_held_without_progress_for_too_long_is_reported() -> None:
    clock = Clock()
    health = Health("indexer@CAIRN_SESSION", clock)
    health.busy()
    clock.now += 299.0
    assert health.problem(SETTINGS) is None
    clock.now += 1.0
    assert health.problem(SETTINGS) == "no progress for 300s on the work it holds"
    health.idle()
    assert health.problem(SETTINGS) is None


@pytest.mark.parametrize("attempts", [1, 5, 40])
def test_restarts_wait_longer_each_time_up_to_the_cap(attempts: int) -> None:
    restarts = Restarts.of(SupervisionSettings(restart_first_s=1.0, restart_cap_s=30.0))
    delay = restarts.backoff.delay(attempts)
    assert min(30.0, 2.0**attempts) / 2 <= delay <= min(30.0, 2.0**attempts)


async def test_a_stop_is_not_taken_for_a_crash_when_the_task_raises_on_its_way_out() -> None:
    """A loop whose `finally` raises (unsubscribing on a closed connection) turns the cancellation into that error:
    the supervisor still stops instead of restarting it for ever after its service has shut down."""
    runs = 0

    async def run() -> None:
        nonlocal runs
        runs += 1
        try:
            await asyncio.sleep(3600)
        finally:
            raise ConnectionError("nats: connection closed")

    health = Health("leaving")
    task = asyncio.create_task(supervise(run, health, QUICK))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout=5)
    assert runs == 1
