"""No long-running task dies for good: each one a service starts (pull loops, partition consumers, workers,
sweeps, listeners) runs under `supervise`, which logs an unexpected exception with its traceback and starts
the task again after a capped, jittered backoff. What a task reports in its `Health` is what readiness and
liveness answer:

- not ready while it is restarting after a crash, or retrying a failure for longer than `stalled_after_s`, or
  stuck on one piece of work for longer than `busy_limit_s` (no progress while it has work);
- not live once it has crashed `give_up_after` times in a row, each run failing within `settle_s` of its start,
  with errors that are not transient: restarting it in-process did not help, so the orchestrator restarts the
  process. A dependency that is down (a transient error) is waited out however long it lasts and never makes
  the process not live: a new process would find it down just the same.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from cairn.delivery.faults import Backoff, describe, is_transient
from cairn.delivery.settings import SupervisionSettings

log = logging.getLogger(__name__)


class Health:
    """One task's state as readiness and liveness see it; the task and its supervisor write it."""

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.name, self._clock = name, clock
        self.failing_since: float | None = None  # the first failure since the last progress
        self.reason: str | None = None  # the latest failure
        self.crashed = False  # the task ended with an exception since its last progress
        self.crashes_in_row = 0  # crashes counted towards liveness (not transient), reset by a settled run
        self.busy_since: float | None = None  # the work it holds now, when it holds some

    def failing(self, error: BaseException) -> None:
        """A failure it retries itself (a batch held while Postgres is away)."""
        if self.failing_since is None:
            self.failing_since = self._clock()
        self.reason = describe(error)

    def progressed(self) -> None:
        """It did some work, or found none to do: whatever failed before works again."""
        self.failing_since, self.reason, self.crashed = None, None, False

    def busy(self) -> None:
        self.busy_since = self._clock()

    def idle(self) -> None:
        self.busy_since = None

    def crash(self, error: BaseException) -> None:
        self.failing(error)
        self.crashed = True
        if not is_transient(error):
            self.crashes_in_row += 1

    def settled(self) -> None:
        """A restarted run has lasted: the crashes before it no longer count as a crash loop."""
        self.crashes_in_row = 0
        if self.crashed:
            self.progressed()

    def problem(self, settings: SupervisionSettings) -> str | None:
        """Why the task is not ready, or None when it is."""
        now = self._clock()
        if self.failing_since is not None and (self.crashed or now - self.failing_since >= settings.stalled_after_s):
            what = "restarting after a crash" if self.crashed else "retrying"
            return f"{what} for {now - self.failing_since:.0f}s: {self.reason}"
        if self.busy_since is not None and now - self.busy_since >= settings.busy_limit_s:
            return f"no progress for {now - self.busy_since:.0f}s on the work it holds"
        return None

    def live(self, settings: SupervisionSettings) -> bool:
        return self.crashes_in_row < settings.give_up_after


@dataclass(frozen=True)
class Restarts:
    """How a supervisor waits between restarts."""

    backoff: Backoff
    settle_s: float

    @classmethod
    def of(cls, settings: SupervisionSettings) -> "Restarts":
        return cls(Backoff(settings.restart_first_s, settings.restart_cap_s), settings.settle_s)

    @classmethod
    def default(cls) -> "Restarts":
        return cls.of(SupervisionSettings())


async def supervise(run: Callable[[], Awaitable[None]], health: Health, restarts: Restarts) -> None:
    """Run `run()` until it returns or the supervisor is cancelled; start it again after every exception."""
    loop = asyncio.get_running_loop()
    attempt = 0
    while True:
        started = loop.time()
        settle = loop.call_later(restarts.settle_s, health.settled)
        try:
            await run()
        except Exception as error:
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # a stop that an error on the way out (a finally) hid
                raise asyncio.CancelledError from error
            health.crash(error)
            attempt = 0 if loop.time() - started >= restarts.settle_s else attempt
            delay = restarts.backoff.delay(attempt)
            attempt += 1
            log.error("%s stopped (%d in a row), restarting in %.1fs", health.name, health.crashes_in_row, delay,
                      exc_info=error)  # fmt: skip
            await asyncio.sleep(delay)
            continue
        finally:
            settle.cancel()
        log.info("%s finished", health.name)
        return
