"""A lean HTTP/1.1 keep-alive client for the load that `cairn bench load` posts, so that what the bench measures
is cairn and not its own client.

httpx builds a Request and a Response object, runs its header, auth and pool machinery and an h11 state machine
for every call: on this 2-core machine ~1 ms of CPU per request, taken from the services it measures. Here a
request is bytes encoded before the timed window (`encode_post`), written to an idle keep-alive connection as
is; the answer is parsed from the bytes by one pure function (`parse_answer`). It speaks just what the bench
needs from cairn's own API: requests with a Content-Length body, answers with a Content-Length body.
"""

import asyncio
import json
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

HEAD_END = b"\r\n\r\n"


class ProtocolError(Exception):
    """An answer this client does not speak (it never guesses: the bench would count wrong)."""


class StatusError(Exception):
    """An answer other than 2xx, with what the server said."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def raise_for_status(self) -> "Answer":
        if not 200 <= self.status < 300:
            raise StatusError(f"HTTP {self.status}: {self.body[:500].decode(errors='replace')}")
        return self


def encode_json(value: Any) -> bytes:
    """JSON the way httpx encodes `json=`: the same bytes on the wire as before this client."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def encode_post(authority: str, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    """A whole POST request with a JSON body, ready to write to a keep-alive connection."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {authority}", "Content-Type: application/json",
             f"Content-Length: {len(body)}", *(f"{name}: {value}" for name, value in headers.items())]  # fmt: skip
    return "\r\n".join(lines).encode("latin-1") + HEAD_END + body


def parse_answer(buffer: bytes | bytearray) -> tuple[Answer, int, bool] | None:
    """The first complete answer in `buffer`, how many bytes it took and whether the connection stays open;
    None while it is incomplete."""
    head_end = buffer.find(HEAD_END)
    if head_end < 0:
        return None
    lines = bytes(buffer[:head_end]).decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
        raise ProtocolError(f"not an HTTP/1.x status line: {lines[0]!r}")
    fields: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip().lower()
    if "transfer-encoding" in fields or "content-length" not in fields:
        raise ProtocolError("the answer has no Content-Length (chunked bodies are not spoken here)")
    start = head_end + len(HEAD_END)
    end = start + int(fields["content-length"])
    if len(buffer) < end:
        return None
    keep = fields.get("connection") != "close" and version == "HTTP/1.1"
    return Answer(int(rest[:3]), bytes(buffer[start:end])), end, keep


class _Connection(asyncio.Protocol):
    """One keep-alive connection, one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[Answer, bool]] | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        try:
            parsed = parse_answer(self.buffer)
        except ProtocolError as error:
            waiter.set_exception(error)
            return
        if parsed is not None:
            answer, used, keep = parsed
            del self.buffer[:used]
            waiter.set_result((answer, keep))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError(f"the server closed the connection before answering ({exc})"))

    async def exchange(self, request: bytes) -> tuple[Answer, bool]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return await self.waiter

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class Client:
    """Keep-alive connections to one server, opened as requests need them; concurrency is the caller's to
    bound (the bench counts a wait for a connection as behind schedule)."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"only http://host:port is spoken here, not {base_url!r}")
        self.host, self.port = parts.hostname, parts.port or 80
        self.authority = parts.netloc
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> bytes:
        """The request bytes for `send` (built before the timed window)."""
        return encode_post(self.authority, path, body, headers)

    async def send(self, request: bytes) -> Answer:
        connection = await self._connection()
        try:
            answer, keep = await connection.exchange(request)
        except BaseException:
            self._drop(connection)
            raise
        if keep and not connection.closed:
            self._idle.append(connection)  # last in, first out: the rest idle out on the server's keep-alive timer
        else:
            self._drop(connection)
        return answer

    async def _connection(self) -> _Connection:
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return connection
            self._open.discard(connection)
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(_Connection, self.host, self.port)
        self._open.add(connection)
        return connection

    def _drop(self, connection: _Connection) -> None:
        connection.close()
        self._open.discard(connection)

    async def aclose(self) -> None:
        for connection in self._open:
            connection.close()
        self._open.clear()
        self._idle.clear()
        await asyncio.sleep(0)  # let the transports close
