"""A TCP relay a test can partition: connections made through it stay open, but while it is cut nothing passes
either way, as when the network to a server goes silent (the case where a client waits longest)."""

import asyncio


class Partition:
    """A relay to `127.0.0.1:<target>`; `partition()` holds every byte either way until `heal()`, so established
    connections hang rather than fail."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.healed = asyncio.Event()
        self.healed.set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> "Partition":
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def partition(self) -> None:
        self.healed.clear()

    def heal(self) -> None:
        self.healed.set()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(source, sink))
            self._tasks.add(task)

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                await self.healed.wait()
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            sink.close()
