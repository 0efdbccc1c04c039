"""Publishing events to JetStream. The event id is the `Nats-Msg-Id` (unless a caller gives an
idempotency key), so a re-publish is deduplicated; trace context travels in the headers.

With `sync_interval: always` JetStream fsyncs a one-replica stream once per message, pipelined or not, but once per
ATOMIC BATCH (ADR-50, nats-server 2.12+, streams declared `allow_atomic`; four, in fact, whatever its size). So
publishes go as atomic batches where that saves fsyncs (from five messages):
- several events for one stream (`publish_many`, `publish_outgoing`) are sent as atomic batches of at most the
  server's limit (1,000 messages), one after the other so the stream keeps their order; streams in parallel;
- a single event joins its stream's group commit (`group_commit`): sent at once when nothing is in flight, else
  with the other single publishes that arrived meanwhile, as one atomic batch.
An atomic batch is stored whole or not at all, and its messages take consecutive sequences (the commit's ack names
the last and the count), so each event's position is known. When JetStream refuses the batch (a message id it has
already stored, which is how a retry looks; a stream without `allow_atomic`; too many batches in flight) nothing of
it is stored, and it is sent again one message at a time, each answered on its own (its duplicate, its error).

Frames are written into the client's pending buffer directly and answered on one wildcard inbox (`acks.Acks`):
about half the CPU per event of nats-py's `publish_async` (tests/integration/test_publisher_batches.py pins the
behaviour against the real server).

How long a publish waits for its acks is the caller's context (`acks_within`): the HTTP edge bounds it per
request, so a write fails fast while NATS is away. Background work (consumers) has no such bound, but no send waits
for its acks longer than `ACK_LOST_S` either: frames written just before the server died are never answered (the
restarted server never saw them, or saw them and lost the connection to answer), and an unbounded wait would hold
the consumer's batch for ever (seen in `make chaos`: a session partition stalled after a NATS kill -9). The
AckTimeout is transient, so the consumer sends again under the same `Nats-Msg-Id`s and JetStream deduplicates."""

import asyncio
import re
import time
import uuid
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar, cast

from nats.errors import MaxPayloadError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.errors import APIError, NoStreamResponseError
from opentelemetry import propagate

from cairn.delivery.acks import Acks, error_of, read_ack
from cairn.delivery.frames import (
    batch_message_headers,
    checked_subject,
    header_block,
    hpub,
    hpub_unanswered,
    message_headers,
)
from cairn.delivery.group_commit import GroupCommit
from cairn.delivery.outcomes import Outcome, Published
from cairn.events import Event, encode_event, stream_for, subject_for

__all__ = [
    "ACK_LOST_S",
    "ATOMIC_BATCH_LIMIT",
    "ATOMIC_BATCH_MIN",
    "AckTimeout",
    "EventPublisher",
    "Outgoing",
    "Published",
    "acks_within",
    "checked_subject",
    "header_block",
    "hpub",
    "message_headers",
]

_ack_wait: ContextVar[float | None] = ContextVar("cairn_publish_ack_wait", default=None)


@contextmanager
def acks_within(seconds: float) -> Iterator[None]:
    """Publishes in this context raise `AckTimeout` when JetStream has not acknowledged them within `seconds`."""
    token = _ack_wait.set(seconds)
    try:
        yield
    finally:
        _ack_wait.reset(token)


class AckTimeout(TimeoutError):
    """No ack within the caller's bound. The event may still be stored (its frame waits in the client's buffer
    for a reconnect, or the ack is late), so this is no refusal: publishing it again with the same
    `Nats-Msg-Id` is deduplicated by JetStream."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"JetStream did not acknowledge the publish within {seconds:g}s")


class Outgoing:
    """An event to publish with the trace headers of the work that produced it. A plain class with slots: one is
    built per emitted event, and a frozen dataclass with a cached property costs twice as much."""

    __slots__ = ("_data", "event", "headers")

    def __init__(self, event: Event, headers: dict[str, str]) -> None:
        self.event, self.headers = event, headers
        self._data: bytes | None = None

    @property
    def data(self) -> bytes:
        """The event as published (and as a projection's outbox stores it): encoded once."""
        if self._data is None:
            self._data = encode_event(self.event)
        return self._data


# The most messages nats-server takes in one atomic batch by default; a server configured lower names its limit
# when it refuses a batch (10199), and the publisher keeps to that from then on.
ATOMIC_BATCH_LIMIT = 1000
# An atomic batch costs nats-server 2.15 four fsyncs whatever its size (measured with `perf stat`: 1 to 1,000
# messages), a message sent on its own one: fewer messages than this go one at a time.
ATOMIC_BATCH_MIN = 5
_ATOMIC_SINCE = (2, 12)
_ATOMIC_DISABLED = 10174  # the stream was declared without `allow_atomic` (`cairn migrate` not run yet)
_TOO_LARGE = 10199
_LIMIT_IN = re.compile(r"too large: (\d+)")
# How long a stream that refused atomic batches is sent to one message at a time before it is asked again.
ATOMIC_RETRY_S = 60.0
# A single publish outside `acks_within` waits as long as nats-py's JetStream `publish` did before it.
_PUBLISH_WAIT_S = 5.0
# The longest one send (a message, a group sent one by one, an atomic batch) waits for its acks, whoever waits for
# it: JetStream answers a stored batch of 1,000 in milliseconds even with a fsync per batch, so an ack this late is
# lost (the server died with the frames unanswered), and waiting longer only holds the sender. A late ack after the
# bound is harmless: the next attempt is deduplicated by its message ids.
ACK_LOST_S = 10.0

T = TypeVar("T")


class _NotAtomic(Exception):
    """The commit's ack does not describe the batch: the server took the messages one by one (batch headers
    unknown to it). The per-message path then finds each by its id."""


class _Item:
    """One event as sent: its checked subject, bytes, header block (trace context, expected stream) and dedup id."""

    __slots__ = ("block", "data", "msg_id", "stream", "subject")

    def __init__(self, subject: bytes, data: bytes, block: bytes, msg_id: str, stream: str) -> None:
        self.subject, self.data, self.block, self.msg_id, self.stream = subject, data, block, msg_id, stream


class EventPublisher:
    def __init__(self, js: JetStreamContext, ack_lost_s: float = ACK_LOST_S) -> None:
        self.js = js
        self.ack_lost_s = ack_lost_s
        self._batches: Acks | None = None
        self._group_commits: dict[str, GroupCommit[_Item]] = {}
        self._atomic_refused: dict[str, float] = {}  # stream -> when to try atomic batches again
        self.atomic_limit = ATOMIC_BATCH_LIMIT

    @property
    def _acks(self) -> Acks:
        if self._batches is None:
            self._batches = Acks(self.js._nc)
        return self._batches

    @staticmethod
    def trace_headers() -> dict[str, str]:
        headers: dict[str, str] = {}
        propagate.inject(headers)
        return headers

    async def publish(self, event: Event, msg_id: str | None = None) -> Published:
        """Publish and wait for JetStream's ack; the sequence is the write's `position`. Outside `acks_within` it
        waits 5 s, then raises nats' TimeoutError, as nats-py's `publish` does."""
        wait = _ack_wait.get()
        items = _Items(self.js._nc._max_payload)
        items.add(event, encode_event(event), self.trace_headers(), msg_id or event.event_id)
        try:
            return (await self._publish(items.items, wait if wait is not None else _PUBLISH_WAIT_S))[0]
        except AckTimeout as timeout:
            if wait is None:
                raise NatsTimeoutError from timeout
            raise

    async def stored(self, stream: str, seq: int) -> bytes:
        """The payload JetStream holds at `seq` (what a duplicate's first publish stored), within the caller's
        `acks_within` bound like a publish: an answer to a retry never waits on NATS longer than the write would."""
        wait = _ack_wait.get()
        try:
            async with asyncio.timeout(wait):
                message = await self.js.get_msg(stream, seq)
        except TimeoutError as timeout:
            if wait is None:
                raise
            raise AckTimeout(wait) from timeout
        return message.data or b""

    async def publish_many(
        self, events: Sequence[Event], msg_ids: Sequence[str | None] | None = None
    ) -> list[Published]:
        """Publish all and wait for every ack. They share one trace context (the caller's), so its headers are made
        once."""
        ids = msg_ids if msg_ids is not None else [None] * len(events)
        trace = self.trace_headers()
        items = _Items(self.js._nc._max_payload)
        for event, msg_id in zip(events, ids, strict=True):
            items.add(event, encode_event(event), trace, msg_id or event.event_id)
        return await self._publish(items.items, _ack_wait.get())

    async def publish_outgoing(self, outgoing: Sequence[Outgoing]) -> None:
        """Publish all, each event with its own trace context, then wait for every ack."""
        items = _Items(self.js._nc._max_payload)
        for o in outgoing:
            items.add(o.event, o.data, o.headers, o.event.event_id)
        await self._publish(items.items, _ack_wait.get())

    async def _publish(self, items: list[_Item], wait: float | None) -> list[Published]:
        """Every event's ack in order; the first error JetStream answered (in the events' order) is raised."""
        if not items:
            return []
        work = self._publish_streams(items)
        outcomes = await (work if wait is None else _within(work, wait))
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                raise outcome
        return cast(list[Published], outcomes)

    async def _publish_streams(self, items: list[_Item]) -> list[Outcome]:
        by_stream: dict[str, list[int]] = {}
        for index, item in enumerate(items):
            by_stream.setdefault(item.stream, []).append(index)
        if len(by_stream) == 1:
            return await self._publish_stream(items)
        parts = await asyncio.gather(
            *(self._publish_stream([items[index] for index in indices]) for indices in by_stream.values())
        )
        outcomes: dict[int, Outcome] = {}
        for indices, part in zip(by_stream.values(), parts, strict=True):
            outcomes.update(zip(indices, part, strict=True))
        return [outcomes[index] for index in range(len(items))]

    async def _publish_stream(self, items: list[_Item]) -> list[Outcome]:
        """One stream's events: a single one joins the stream's group commit; more go as atomic batches of at most
        the limit, each sent after the one before is answered, so that the stream keeps their order."""
        if len(items) == 1:
            return [await self._group_commit(items[0].stream).publish(items[0])]
        outcomes: list[Outcome] = []
        while len(outcomes) < len(items):
            outcomes += await self._send(items[len(outcomes) : len(outcomes) + self.atomic_limit])
        return outcomes

    def _group_commit(self, stream: str) -> GroupCommit[_Item]:
        group_commit = self._group_commits.get(stream)
        if group_commit is None:
            group_commit = self._group_commits[stream] = GroupCommit(self._send, lambda: self.atomic_limit)
        return group_commit

    async def _send(self, items: list[_Item]) -> list[Outcome]:
        """Several events of one stream as one atomic batch when there are enough of them to save fsyncs and the
        server and stream take it; otherwise, or when JetStream refused the batch (and so stored none of it), one
        message at a time, each answered on its own."""
        if len(items) >= ATOMIC_BATCH_MIN and self._atomic_allowed(items[0].stream):
            try:
                return await self._send_atomic(items)
            except (APIError, NoStreamResponseError, _NotAtomic) as refused:
                self._learn(items[0].stream, refused)
        return await self._send_each(items)

    def _atomic_allowed(self, stream: str) -> bool:
        version = self.js._nc.connected_server_version
        if (version.major, version.minor) < _ATOMIC_SINCE:
            return False
        again = self._atomic_refused.get(stream)
        return again is None or time.monotonic() >= again

    def _learn(self, stream: str, refused: Exception) -> None:
        if not isinstance(refused, APIError):
            return
        if refused.err_code == _ATOMIC_DISABLED:
            self._atomic_refused[stream] = time.monotonic() + ATOMIC_RETRY_S
        elif refused.err_code == _TOO_LARGE and (limit := _LIMIT_IN.search(refused.description or "")):
            self.atomic_limit = max(1, min(self.atomic_limit, int(limit[1])))

    async def _send_atomic(self, items: list[_Item]) -> list[Outcome]:
        """One atomic batch: only its last message (the commit) asks for an answer; the commit's ack names the
        batch, its count and the last sequence, and the batch's messages hold the sequences before it."""
        acks = self._acks
        reply, commit = acks.expect_commit(await acks.prefix())
        batch_id = uuid.uuid4().hex
        *body, last = items
        frames = [
            hpub_unanswered(item.subject, batch_message_headers(item.block, item.msg_id, batch_id, n, False), item.data)
            for n, item in enumerate(body, 1)
        ]
        headers = batch_message_headers(last.block, last.msg_id, batch_id, len(items), True)
        frames.append(hpub(last.subject, reply.encode(), headers, last.data))
        try:
            await acks.send(frames, sum(len(item.data) for item in items))
            answer = await _within(commit, self.ack_lost_s)
        finally:
            acks.forget([reply])
        error = error_of(answer)
        if error is not None:
            raise error
        ack = read_ack(answer.data)
        if ack.get("batch") != batch_id or ack.get("count") != len(items):
            raise _NotAtomic(answer.data.decode(errors="replace"))
        first = int(cast(int, ack["seq"])) - len(items) + 1
        return [Published(first + n, False) for n in range(len(items))]

    async def _send_each(self, items: list[_Item]) -> list[Outcome]:
        acks = self._acks
        replies, answers = acks.expect(len(items), await acks.prefix())
        frames = [
            hpub(item.subject, reply.encode(), message_headers(item.block, item.msg_id), item.data)
            for item, reply in zip(items, replies, strict=True)
        ]
        try:
            await acks.send(frames, sum(len(item.data) for item in items))
            return await _within(answers.done, self.ack_lost_s)
        except BaseException:
            acks.forget(replies)
            raise


class _Items:
    """Events made ready to send, checked before anything is: each subject once, each payload against the server's
    limit; events of one stream and trace context share their header block."""

    def __init__(self, max_payload: int) -> None:
        self.items: list[_Item] = []
        self._max_payload = max_payload
        self._subjects: dict[str, bytes] = {}
        self._blocks: dict[tuple[int, str], bytes] = {}

    def add(self, event: Event, data: bytes, headers: Mapping[str, str], msg_id: str) -> None:
        if len(data) > self._max_payload:
            raise MaxPayloadError
        subject, stream = subject_for(event), stream_for(event)
        checked = self._subjects.get(subject)
        if checked is None:
            checked = self._subjects[subject] = checked_subject(subject)
        key = (id(headers), stream)  # the events of one batch share their headers' dict
        block = self._blocks.get(key)
        if block is None:
            block = self._blocks[key] = header_block(headers, stream)
        self.items.append(_Item(checked, data, block, msg_id, stream))


async def _within(work: Awaitable[T], wait: float) -> T:
    bound = asyncio.timeout(wait)
    try:
        async with bound:
            return await work
    except TimeoutError as error:
        if bound.expired():  # not a TimeoutError from inside
            raise AckTimeout(wait) from error
        raise
