"""Read-your-writes waits woken by the indexer's commits: it notifies `INDEX_PROGRESS_CHANNEL` whenever it
advances a session search position and `MEMORY_PROGRESS_CHANNEL` whenever the memory index advances one or
chunks a due session (delivered at its commit), and a waiting search looks again at once instead of at its
next poll. The waits still poll, so a lost listening connection only makes them slower."""

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import asyncpg

from cairn.storage.postgres import INDEX_PROGRESS_CHANNEL, MEMORY_PROGRESS_CHANNEL

log = logging.getLogger(__name__)

CHANNELS = (INDEX_PROGRESS_CHANNEL, MEMORY_PROGRESS_CHANNEL)


class IndexProgress:
    """A background listener, run as one of the service's consumers (one connection per process)."""

    consumer = "index-progress-listener"
    stream = "-"

    def __init__(self, url: str) -> None:
        self._url = url
        self._changed = {channel: asyncio.Event() for channel in CHANNELS}

    def changed(self, channel: str = INDEX_PROGRESS_CHANNEL) -> asyncio.Event:
        """Set at the next notification on `channel` after this call: take it before looking at the position, so
        a commit between the look and the wait is not missed."""
        return self._changed[channel]

    def _notified(self, _conn: object, _pid: int, channel: str, _payload: object) -> None:
        changed, self._changed[channel] = self._changed[channel], asyncio.Event()
        changed.set()

    def _missed(self) -> None:
        for channel in CHANNELS:
            self._notified(None, 0, channel, None)

    async def run(self) -> None:
        while True:
            try:
                await self._listen()
            except (OSError, asyncpg.PostgresError) as error:
                log.warning("cannot listen for index progress (waits only poll meanwhile): %s", error)
                await asyncio.sleep(1.0)
            self._missed()  # what was missed meanwhile: every wait looks again

    async def _listen(self) -> None:
        """Until the connection is lost."""
        conn = await asyncpg.connect(self._url)
        lost = asyncio.Event()
        try:
            conn.add_termination_listener(lambda _: lost.set())
            for channel in CHANNELS:
                await conn.add_listener(channel, self._notified)
            await lost.wait()
            log.warning("lost the index progress listener, reconnecting")
        finally:
            conn.terminate()


async def wait_until(
    reached: Callable[[], Awaitable[bool]], bound_s: float, poll_s: float, woken: Callable[[], asyncio.Event] | None
) -> bool:
    """Look until `reached()` (True) or the bound (False, after one more look at it): again after each `poll_s`,
    or at once when the event `woken()` gave before the look is set."""
    deadline = time.monotonic() + bound_s
    while True:
        changed = woken() if woken else None
        if await reached():
            return True
        if time.monotonic() >= deadline:
            return False
        pause = min(poll_s, max(0.0, deadline - time.monotonic()))
        if changed is None:
            await asyncio.sleep(pause)
        else:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for returns a wait that completed as a cancellation
            # arrived, swallowing the cancellation (a recall cut off by its deadline then ran on, model call included)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause):
                    await changed.wait()
