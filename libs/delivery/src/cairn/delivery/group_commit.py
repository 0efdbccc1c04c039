"""Group commit of single publishes to one stream. With `sync_interval: always` JetStream fsyncs once per message
of a one-replica stream, however the messages are pipelined, but once per atomic batch; so publishes that arrive
while one is in flight (many `POST /v1/messages` at once) wait for it and then go together as one atomic batch.
When nothing is in flight a publish is sent at once: no added latency when idle. Each caller gets its own outcome
(its sequence, its duplicate, its error), and waits for it within its own bound."""

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from cairn.delivery.outcomes import Outcome

# How long a group in flight holds back the next one: its acks normally come within milliseconds; this bound only
# keeps a lost ack (a stream leader change in a cluster) from stalling the stream's other publishers. A caller
# still waits for its own ack as long as its own bound allows.
IN_FLIGHT_S = 2.0

Item = TypeVar("Item")


class GroupCommit(Generic[Item]):
    def __init__(self, send: Callable[[list[Item]], Awaitable[list[Outcome]]], limit: Callable[[], int]) -> None:
        """`send` publishes a group (as one atomic batch when it can) and answers each item's outcome; `limit` is
        the most items a group may hold (the server's atomic batch limit)."""
        self._send = send
        self._limit = limit
        self._waiting: list[tuple[Item, asyncio.Future[Outcome]]] = []
        self._sender: asyncio.Task[None] | None = None
        self._in_flight: set[asyncio.Task[None]] = set()

    async def publish(self, item: Item) -> Outcome:
        answer: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, answer))
        if self._sender is None:  # the sender runs in a context of its own, not the first caller's
            self._sender = asyncio.create_task(self._send_waiting(), context=contextvars.Context())
        return await answer  # a caller that gives up cancels its answer, and its item is skipped if not sent yet

    async def _send_waiting(self) -> None:
        try:
            while self._waiting:
                limit = self._limit()
                group = [waiting for waiting in self._waiting[:limit] if not waiting[1].done()]
                del self._waiting[:limit]
                if group:
                    sending = asyncio.create_task(self._answer(group))
                    self._in_flight.add(sending)
                    sending.add_done_callback(self._in_flight.discard)
                    await asyncio.wait([sending], timeout=IN_FLIGHT_S)
        finally:
            self._sender = None

    async def _answer(self, group: list[tuple[Item, "asyncio.Future[Outcome]"]]) -> None:
        try:
            outcomes = await self._send([item for item, _ in group])
        except Exception as error:  # the connection took none of them (closed, draining, buffer full)
            outcomes = [error] * len(group)
        except BaseException:
            for _, answer in group:
                answer.cancel()
            raise
        for (_, answer), outcome in zip(group, outcomes, strict=True):
            if not answer.done():
                answer.set_result(outcome)
