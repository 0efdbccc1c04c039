"""Publishing events to JetStream. The event id is the `Nats-Msg-Id` (unless a caller gives an
idempotency key), so a re-publish is deduplicated; trace context travels in the headers.

A batch (`publish_many`, `publish_outgoing`) is written as one buffer of HPUB frames whose replies go to one
wildcard inbox of this publisher (`_Acks`); each publish is reported only once JetStream's ack for its reply
subject came back, and the batch once all are. That is what nats-py's `publish_async` does per message, without
its per-message NUID, header re-encoding, future and done callbacks and flush requests: about half the CPU per
published event (tests/integration/test_publisher_batches.py pins the behaviour against the real server).

How long a publish waits for its acks is the caller's context (`acks_within`): the HTTP edge bounds it per
request, so a write fails fast while NATS is away, and background work (consumers) waits as long as it takes."""

import asyncio
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import cast

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import (
    BadHeaderError,
    BadSubjectError,
    ConnectionClosedError,
    ConnectionDrainingError,
    MaxPayloadError,
    OutboundBufferLimitError,
)
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.errors import APIError, NoStreamResponseError
from opentelemetry import propagate

from cairn.events import Event, encode_event, stream_for, subject_for

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


@dataclass(frozen=True)
class Published:
    seq: int
    duplicate: bool


MSG_ID = "Nats-Msg-Id"
EXPECTED_STREAM = "Nats-Expected-Stream"
_OWN = {MSG_ID.lower(), EXPECTED_STREAM.lower()}
# as nats-py checks and cleans headers: a key is an HTTP token, a value is trimmed and has no CR/LF
_HEADER_KEY = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_SEQ = re.compile(rb'[{,]"seq":(\d+)[,}]')
_NEWLINES = str.maketrans({"\r": " ", "\n": " "})
# what nats-py refuses in a subject it publishes to (CR/LF or whitespace would break the protocol line)
_BAD_SUBJECT = re.compile(r"[ \t\r\n]")


def header_block(headers: Mapping[str, str], stream: str) -> bytes:
    """The start of a message's header section: the version line, `headers` (ours win over theirs) and the
    expected stream. A message appends its `Nats-Msg-Id` line and the blank line (`message_headers`)."""
    lines = [b"NATS/1.0\r\n"]
    for name, value in headers.items():
        key = name.strip()
        if not key or key.lower() in _OWN:
            continue
        if not _HEADER_KEY.fullmatch(key):
            raise BadHeaderError(key)
        lines.append(f"{key}: {value.strip().translate(_NEWLINES)}\r\n".encode())
    lines.append(f"{EXPECTED_STREAM}: {stream}\r\n".encode())
    return b"".join(lines)


def message_headers(block: bytes, msg_id: str) -> bytes:
    return b"%s%s: %s\r\n\r\n" % (block, MSG_ID.encode(), msg_id.strip().translate(_NEWLINES).encode())


def hpub(subject: bytes, reply: bytes, headers: bytes, payload: bytes) -> bytes:
    """One HPUB frame, as nats-py's `hpub_cmd` writes it."""
    size = len(headers)
    return b"HPUB %s %s %d %d\r\n%s%s\r\n" % (subject, reply, size, size + len(payload), headers, payload)


def checked_subject(subject: str) -> bytes:
    if not subject or _BAD_SUBJECT.search(subject):
        raise BadSubjectError
    return subject.encode()


class _Batch:
    """The acks one batch waits for: its results by position, how many are missing, and one future for all."""

    __slots__ = ("done", "missing", "results")

    def __init__(self, count: int) -> None:
        self.results: list[Published | None] = [None] * count
        self.missing = count
        self.done: asyncio.Future[list[Published]] = asyncio.get_running_loop().create_future()

    def acked(self, index: int, published: Published) -> None:
        if self.results[index] is None:
            self.results[index] = published
            self.missing -= 1
            if not self.missing and not self.done.done():
                self.done.set_result(cast(list[Published], self.results))

    def failed(self, error: Exception) -> None:
        if not self.done.done():
            self.done.set_exception(error)


class _Acks:
    """The acks of this publisher's batches: one subscription to `<inbox>.*`, a reply subject per message
    (`<inbox>.<n>`), and the batch (and position in it) each one's ack completes. nats-py resubscribes it after a
    reconnect and keeps unsent frames in its pending buffer, as for its own publishes."""

    def __init__(self, nc: Client) -> None:
        self._nc = nc
        self._prefix = ""
        self._next = 0
        self._waiting: dict[str, tuple[_Batch, int]] = {}
        self._lock = asyncio.Lock()

    async def prefix(self) -> str:
        if not self._prefix:
            async with self._lock:
                if not self._prefix:
                    prefix = self._nc.new_inbox() + "."
                    await self._nc.subscribe(prefix + "*", cb=self._on_ack)
                    self._prefix = prefix
        return self._prefix

    def expect(self, count: int, prefix: str) -> tuple[list[str], _Batch]:
        """`count` reply subjects and the batch their acks complete."""
        batch = _Batch(count)
        first = self._next
        self._next += count
        replies = [f"{prefix}{n}" for n in range(first, first + count)]
        waiting = self._waiting
        for index, reply in enumerate(replies):
            waiting[reply] = (batch, index)
        return replies, batch

    def forget(self, replies: Sequence[str]) -> None:
        for reply in replies:
            self._waiting.pop(reply, None)

    async def _on_ack(self, msg: Msg) -> None:
        waiting = self._waiting.pop(msg.subject, None)
        if waiting is None:
            return
        batch, index = waiting
        data = msg.data
        seq = _SEQ.search(data) if b'"error"' not in data and b'"duplicate"' not in data else None
        if seq is not None and not msg.headers:  # the usual ack, {"stream":"X","seq":N}, read without json
            batch.acked(index, Published(int(seq[1]), False))
            return
        status = msg.headers.get("Status") if msg.headers else None
        if status is not None:  # 503: no stream listens on the subject
            description = msg.headers.get("Description", "") if msg.headers else ""
            batch.failed(
                NoStreamResponseError() if status == "503" else APIError(code=int(status), description=description)
            )
            return
        try:
            response = json.loads(data)
            if "error" in response:
                APIError.from_error(response["error"])  # raises the error's class (nats-py's own callback lets
                # it escape, and its publish_async then waits for ever)
            batch.acked(index, Published(int(response["seq"]), bool(response.get("duplicate", False))))
        except APIError as error:
            batch.failed(error)
        except (ValueError, KeyError, TypeError) as error:
            batch.failed(APIError(description=f"unreadable ack: {error}"))

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


class EventPublisher:
    def __init__(self, js: JetStreamContext) -> None:
        self.js = js
        self._batches: _Acks | None = None

    @property
    def _acks(self) -> _Acks:
        if self._batches is None:
            self._batches = _Acks(self.js._nc)
        return self._batches

    @staticmethod
    def trace_headers() -> dict[str, str]:
        headers: dict[str, str] = {}
        propagate.inject(headers)
        return headers

    def _headers(self, event: Event, msg_id: str | None) -> dict[str, str]:
        return {**self.trace_headers(), MSG_ID: msg_id or event.event_id}

    async def publish(self, event: Event, msg_id: str | None = None) -> Published:
        """Publish and wait for JetStream's ack; the sequence is the write's `position`."""
        wait = _ack_wait.get()
        try:
            ack = await self.js.publish(
                subject_for(event),
                encode_event(event),
                stream=stream_for(event),
                headers=self._headers(event, msg_id),
                timeout=wait,  # None: the context's default (5 s), then nats' TimeoutError as before
            )
        except NatsTimeoutError as error:
            if wait is None:
                raise
            raise AckTimeout(wait) from error
        return Published(int(ack.seq), bool(ack.duplicate))

    async def publish_many(
        self, events: Sequence[Event], msg_ids: Sequence[str | None] | None = None
    ) -> list[Published]:
        """Send all in order without waiting between them, then wait for every ack. They share one trace
        context (the caller's), so its headers are made once."""
        ids = msg_ids if msg_ids is not None else [None] * len(events)
        trace = self.trace_headers()
        blocks: dict[str, bytes] = {}  # per stream
        items = []
        for event, msg_id in zip(events, ids, strict=True):
            stream = stream_for(event)
            block = blocks.get(stream)
            if block is None:
                block = blocks[stream] = header_block(trace, stream)
            items.append((subject_for(event), encode_event(event), block, msg_id or event.event_id))
        return await self._publish(items)

    async def publish_outgoing(self, outgoing: Sequence[Outgoing]) -> None:
        """Publish in order, each event with its own trace context, then wait for every ack."""
        blocks: dict[tuple[int, str], bytes] = {}  # events of one batch share their headers' dict
        items = []
        for o in outgoing:
            stream = stream_for(o.event)
            key = (id(o.headers), stream)
            block = blocks.get(key)
            if block is None:
                block = blocks[key] = header_block(o.headers, stream)
            items.append((subject_for(o.event), o.data, block, o.event.event_id))
        await self._publish(items)

    async def _publish(self, items: Sequence[tuple[str, bytes, bytes, str]]) -> list[Published]:
        if not items:
            return []
        nc = self._acks._nc
        subjects: dict[str, bytes] = {}
        payload_bytes = 0
        for subject, data, _, _ in items:
            if len(data) > nc._max_payload:
                raise MaxPayloadError
            payload_bytes += len(data)
            if subject not in subjects:
                subjects[subject] = checked_subject(subject)
        prefix = await self._acks.prefix()
        replies, batch = self._acks.expect(len(items), prefix)
        frames = [
            hpub(subjects[subject], reply.encode(), message_headers(block, msg_id), data)
            for (subject, data, block, msg_id), reply in zip(items, replies, strict=True)
        ]
        try:
            await self._acks.send(frames, payload_bytes)
            return await _within(batch.done, _ack_wait.get())
        except BaseException:
            self._acks.forget(replies)
            raise


async def _within(acks: "asyncio.Future[list[Published]]", wait: float | None) -> list[Published]:
    if wait is None:
        return await acks
    try:
        return await asyncio.wait_for(acks, wait)
    except TimeoutError as error:  # a failed ack sets another error: this is the bound running out
        raise AckTimeout(wait) from error
