"""JetStream's answers to this publisher's frames: one subscription to a wildcard inbox (`<inbox>.*`), a reply
subject per answer awaited (`<inbox>.<n>`), and what each answer completes: a message's place in a batch sent one
message at a time (`Answers`), or the commit of an atomic batch (a future of the raw reply). nats-py resubscribes
the inbox after a reconnect and keeps unsent frames in its pending buffer, as for its own publishes."""

import asyncio
import json
import re
from collections.abc import Sequence
from typing import cast

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import ConnectionClosedError, ConnectionDrainingError, OutboundBufferLimitError
from nats.js.errors import APIError, NoStreamResponseError

from cairn.delivery.outcomes import Outcome, Published

_SEQ = re.compile(rb'[{,]"seq":(\d+)[,}]')


class Answers:
    """The answers a batch sent one message at a time waits for: each message's own outcome by position (its ack,
    or the error JetStream answered for it), how many are missing, and one future for all."""

    __slots__ = ("done", "missing", "outcomes")

    def __init__(self, count: int) -> None:
        self.outcomes: list[Outcome | None] = [None] * count
        self.missing = count
        self.done: asyncio.Future[list[Outcome]] = asyncio.get_running_loop().create_future()

    def answered(self, index: int, outcome: Outcome) -> None:
        if self.outcomes[index] is None:
            self.outcomes[index] = outcome
            self.missing -= 1
            if not self.missing and not self.done.done():
                self.done.set_result(cast(list[Outcome], self.outcomes))


def error_of(msg: Msg) -> Exception | None:
    """The error a reply carries in its status headers (503: no stream listens on the subject), if any."""
    status = msg.headers.get("Status") if msg.headers else None
    if status is None:
        return None
    if status == "503":
        return NoStreamResponseError()
    description = msg.headers.get("Description", "") if msg.headers else ""
    return APIError(code=int(status), description=description)


def read_ack(data: bytes) -> dict[str, object]:
    """A JetStream publish ack as JSON; an error answer raises its nats-py class (`APIError.from_error`)."""
    try:
        response = json.loads(data)
    except ValueError as error:
        raise APIError(description=f"unreadable ack: {error}") from error
    if not isinstance(response, dict):
        raise APIError(description=f"unreadable ack: {data[:200]!r}")
    if "error" in response:
        APIError.from_error(response["error"])
    return cast(dict[str, object], response)


def _outcome(msg: Msg) -> Outcome:
    data = msg.data
    seq = _SEQ.search(data) if b'"error"' not in data and b'"duplicate"' not in data else None
    if seq is not None and not msg.headers:  # the usual ack, {"stream":"X","seq":N}, read without json
        return Published(int(seq[1]), False)
    error = error_of(msg)
    if error is not None:
        return error
    try:
        response = read_ack(data)
        return Published(int(cast(int, response["seq"])), bool(response.get("duplicate", False)))
    except APIError as refused:
        return refused
    except (KeyError, TypeError, ValueError) as unreadable:
        return APIError(description=f"unreadable ack: {unreadable}")


class Acks:
    def __init__(self, nc: Client) -> None:
        self._nc = nc
        self._prefix = ""
        self._next = 0
        self._waiting: dict[str, tuple[Answers, int] | asyncio.Future[Msg]] = {}
        self._lock = asyncio.Lock()

    async def prefix(self) -> str:
        if not self._prefix:
            async with self._lock:
                if not self._prefix:
                    prefix = self._nc.new_inbox() + "."
                    await self._nc.subscribe(prefix + "*", cb=self._on_ack)
                    self._prefix = prefix
        return self._prefix

    def expect(self, count: int, prefix: str) -> tuple[list[str], Answers]:
        """`count` reply subjects and the answers they complete."""
        answers = Answers(count)
        first = self._next
        self._next += count
        replies = [f"{prefix}{n}" for n in range(first, first + count)]
        waiting = self._waiting
        for index, reply in enumerate(replies):
            waiting[reply] = (answers, index)
        return replies, answers

    def expect_commit(self, prefix: str) -> tuple[str, "asyncio.Future[Msg]"]:
        """The reply subject of an atomic batch's commit and the future of JetStream's answer to it."""
        reply = f"{prefix}{self._next}"
        self._next += 1
        commit: asyncio.Future[Msg] = asyncio.get_running_loop().create_future()
        self._waiting[reply] = commit
        return reply, commit

    def forget(self, replies: Sequence[str]) -> None:
        for reply in replies:
            self._waiting.pop(reply, None)

    async def _on_ack(self, msg: Msg) -> None:
        waiting = self._waiting.pop(msg.subject, None)
        if waiting is None:
            return
        if isinstance(waiting, asyncio.Future):
            if not waiting.done():
                waiting.set_result(msg)
            return
        answers, index = waiting
        answers.answered(index, _outcome(msg))

    async def send(self, frames: list[bytes], payload_bytes: int) -> None:
        """Queue the frames in the client's pending buffer and have its flusher write them, with the checks
        `Client.publish` makes."""
        nc = self._nc
        if nc.is_closed:
            raise ConnectionClosedError
        if nc.is_draining_pubs:
            raise ConnectionDrainingError
        data = b"".join(frames)
        if not nc.is_connected and (
            nc._max_pending_size <= 0 or len(data) + nc._pending_data_size > nc._max_pending_size
        ):
            raise OutboundBufferLimitError
        nc.stats["out_msgs"] += len(frames)
        nc.stats["out_bytes"] += payload_bytes
        await nc._send_command(data)
        if nc._flush_queue is not None and nc._flush_queue.empty():
            await nc._flush_pending()
