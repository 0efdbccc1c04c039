"""uvicorn's two HTTP/1.1 protocols with a header-read timeout, which uvicorn lacks: a connection whose request
headers (or, when new, whose first bytes) do not all arrive within `header_timeout_s` is closed. Otherwise a
client that sends half a request and stalls holds its connection, and its memory, for ever; uvicorn's own
keep-alive timer covers only the idle time between requests. The timer is armed where the protocol starts
waiting for headers and disarmed where they are complete, so a slow answer or body is not affected."""

import asyncio
import logging
from collections.abc import Callable
from typing import Literal

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)


class HeaderDeadline:
    """One timer per connection, armed at most once at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop, seconds: float, expire: Callable[[], None]) -> None:
        self._loop, self._seconds, self._expire = loop, seconds, expire
        self._timer: asyncio.TimerHandle | None = None

    def arm(self) -> None:
        if self._timer is None:
            self._timer = self._loop.call_later(self._seconds, self._fire)

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self) -> None:
        self._timer = None
        self._expire()


def _close(transport: asyncio.Transport, client: object, seconds: float) -> None:
    if not transport.is_closing():
        log.info("closing a connection from %s: no complete request headers within %gs", client, seconds)
        transport.close()


class HttpToolsWithHeaderTimeout(HttpToolsProtocol):
    header_timeout_s = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.header_deadline = HeaderDeadline(self.loop, self.header_timeout_s, self._headers_late)
        self.header_deadline.arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.header_deadline.arm()

    def on_headers_complete(self) -> None:
        self.header_deadline.disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self.header_deadline.disarm()
        super().connection_lost(exc)

    def _headers_late(self) -> None:
        if self.cycle is not None and not self.cycle.response_complete:
            self.header_deadline.arm()  # a pipelined request's headers: the answer in progress goes first
            return
        _close(self.transport, self.client, self.header_timeout_s)


class H11WithHeaderTimeout(H11Protocol):
    header_timeout_s = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.header_deadline = HeaderDeadline(self.loop, self.header_timeout_s, self._headers_late)
        self.header_deadline.arm()

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # a request's headers are in (or the connection is done)
            self.header_deadline.disarm()
        elif self.conn.trailing_data[0]:  # part of the next request's head is buffered
            self.header_deadline.arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self.header_deadline.disarm()
        super().connection_lost(exc)

    def _headers_late(self) -> None:
        if self.conn.their_state is h11.IDLE:
            _close(self.transport, self.client, self.header_timeout_s)


def with_header_timeout(parser: Literal["httptools", "h11"], seconds: float) -> type[asyncio.Protocol]:
    """The protocol class uvicorn's `http=` takes, for `parser`, closing connections `seconds` into a request
    head that is not complete."""
    base: type[HttpToolsWithHeaderTimeout | H11WithHeaderTimeout] = (
        HttpToolsWithHeaderTimeout if parser == "httptools" else H11WithHeaderTimeout
    )
    return type(base.__name__, (base,), {"header_timeout_s": seconds})
