"""A chat-completions server that never answers, for `cairn bench recall`'s load part: it accepts a connection,
reads the request, and then holds it, answering nothing, until the client goes. It counts requests, the
connections the client closed (a recall cancelled at its deadline closes its model call) and the most held at
once. It runs its own event loop in a thread, so holding connections costs the bench's loop nothing."""

import asyncio
import contextlib
import threading
from collections.abc import Callable
from types import TracebackType

HOLD_LIMIT_S = 300.0  # a connection is let go after this even if its client never closes it
READY_WITHIN_S = 10.0


class HangingModel:
    def __init__(self) -> None:
        self.requests = 0
        self.disconnects = 0
        self.held = 0
        self.most_held = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._changed = threading.Condition()
        self._handlers: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._closing = False
        self._thread = threading.Thread(target=self._serve, name="hanging-model", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def wait_until(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Block until `condition` (of the counts) holds or `timeout_s` passes; whether it holds."""
        with self._changed:
            return self._changed.wait_for(condition, timeout_s)

    def _count(self, held: int, requests: int = 0, disconnects: int = 0) -> None:
        with self._changed:
            self.held += held
            self.requests += requests
            self.disconnects += disconnects
            self.most_held = max(self.most_held, self.held)
            self._changed.notify_all()

    def __enter__(self) -> "HangingModel":
        self._thread.start()
        if not self._ready.wait(READY_WITHIN_S):
            raise RuntimeError("the hanging model server did not start")
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(READY_WITHIN_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(READY_WITHIN_S)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._hold, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _close(self) -> None:
        """Stop listening and let every held connection go: closing its transport ends its handler's read (no
        cancellation, which asyncio's stream callback would report as an error)."""
        self._closing = True
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        if self._handlers:
            await asyncio.wait(set(self._handlers), timeout=READY_WITHIN_S)

    async def _hold(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._writers.add(writer)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)  # fmt: skip
            await reader.readexactly(length)
            self._count(held=1, requests=1)
            closed = 0
            try:
                async with asyncio.timeout(HOLD_LIMIT_S):
                    while await reader.read(4096):  # b"": the client closed the connection
                        pass
                closed = 0 if self._closing else 1  # b"" after our own close at shutdown is not the client's
            finally:
                self._count(held=-1, disconnects=closed)
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            self._handlers.discard(task)
            self._writers.discard(writer)
