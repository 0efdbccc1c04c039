"""Read-your-writes waits woken by the indexer's commits: it notifies `INDEX_PROGRESS_CHANNEL` whenever it
advances a position (delivered at its commit), and a waiting search looks again at once instead of at its
next poll. The waits still poll, so a lost listening connection only makes them slower."""

import asyncio
import logging

import asyncpg

from cairn.platform.postgres import INDEX_PROGRESS_CHANNEL

log = logging.getLogger(__name__)


class IndexProgress:
    """A background listener, run as one of the service's consumers (one connection per process)."""

    consumer = "index-progress-listener"
    stream = "-"

    def __init__(self, url: str) -> None:
        self._url = url
        self._changed = asyncio.Event()

    def changed(self) -> asyncio.Event:
        """Set at the next notification after this call: take it before looking at the position, so a commit
        between the look and the wait is not missed."""
        return self._changed

    def _notified(self, *_: object) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def run(self) -> None:
        while True:
            try:
                await self._listen()
            except (OSError, asyncpg.PostgresError) as error:
                log.warning("cannot listen for index progress (waits only poll meanwhile): %s", error)
                await asyncio.sleep(1.0)
            self._notified()  # what was missed meanwhile: every wait looks again

    async def _listen(self) -> None:
        """Until the connection is lost."""
        conn = await asyncpg.connect(self._url)
        lost = asyncio.Event()
        try:
            conn.add_termination_listener(lambda _: lost.set())
            await conn.add_listener(INDEX_PROGRESS_CHANNEL, self._notified)
            await lost.wait()
            log.warning("lost the index progress listener, reconnecting")
        finally:
            conn.terminate()
