"""Durable JetStream pull consumers: one long fetch at a time, batches handled in stream order, dead
letters with the reason.

A batch that fails for a transient reason (faults.py: Postgres restarting, a dropped connection, a
serialization failure, NATS reconnecting) is held: its unsettled messages stay in progress (`+WPI` before
`ack_wait` runs out, so JetStream neither redelivers them nor counts another delivery) and the batch is
retried in-process with a capped backoff for as long as the failure lasts; nothing is fetched meanwhile, so
events keep their order and none is dead-lettered for a dependency's outage. Holding the whole loop costs
nothing extra: while Postgres or NATS is away no other batch could be applied either.

Not a FastStream subscriber on purpose: its pull subscriber runs the messages of one fetch
concurrently (breaking per-session order), and its batch mode re-fetches with shrinking timeouts,
racing pull-request expiry so that messages sit unseen until `ack_wait` (seen as 5-second stalls).
"""

import asyncio
import contextlib
import json
import logging
from collections.abc import Sequence
from typing import NamedTuple, Protocol

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy, Header, StatusCode

from cairn.delivery.counts import counts_of
from cairn.delivery.dead_letters import letter_subject
from cairn.delivery.faults import Backoff, is_transient
from cairn.delivery.settings import NatsSettings
from cairn.delivery.supervision import Health
from cairn.events import DEAD_LETTER_STREAM

log = logging.getLogger(__name__)

_V1_TOKENS, _V2_MIN_TOKENS = 9, 11  # ack subjects without and with domain + account hash (+ a random token)
_REQUEST_ENDED = (StatusCode.NO_MESSAGES, StatusCode.REQUEST_TIMEOUT, StatusCode.CONFLICT)
_EXPIRY_GRACE_S = 0.5  # how long past the request's expiry its closing status may take to arrive


class Delivery(NamedTuple):
    """Where a message sits in its stream: handlers use the sequence for read-your-writes positions. A named
    tuple: one is built per message, at half the cost of a frozen dataclass."""

    stream_seq: int
    num_delivered: int
    subject: str

    @classmethod
    def of(cls, raw: Msg) -> "Delivery":
        """Read from the ack subject, `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.…` (9 tokens) or,
        with a domain and account hash, 11 or more; nats-py's `metadata` parses every field (a timezone-aware
        timestamp too), a measurable cost per message, so only what is used is read here and anything else
        is left to it (it raises for a message that did not come from JetStream)."""
        tokens = (raw.reply or "").split(".")
        if tokens[:2] == ["$JS", "ACK"] and (len(tokens) == _V1_TOKENS or len(tokens) >= _V2_MIN_TOKENS):
            first = 4 if len(tokens) == _V1_TOKENS else 6  # where the delivery count sits
            return cls(int(tokens[first + 1]), int(tokens[first]), raw.subject)
        meta = raw.metadata
        return cls(meta.sequence.stream, meta.num_delivered, raw.subject)


def stream_time(raw: Msg) -> float:
    """When a message entered its stream (Unix seconds), read from its ack subject as `Delivery.of` reads the rest
    (the timestamp sits three tokens after the delivery count, in nanoseconds)."""
    tokens = (raw.reply or "").split(".")
    if tokens[:2] == ["$JS", "ACK"] and (len(tokens) == _V1_TOKENS or len(tokens) >= _V2_MIN_TOKENS):
        first = 4 if len(tokens) == _V1_TOKENS else 6
        return int(tokens[first + 3]) / 1e9
    return raw.metadata.timestamp.timestamp()


async def fetch(subscription: JetStreamContext.PullSubscription, batch: int, wait_s: float) -> list[Msg]:
    """At most `batch` messages of the pull subscription, waiting at most `wait_s` for the first; raises
    `nats.errors.TimeoutError` when none came. One pull request per call, as nats-py's `fetch` sends it
    (`no_wait` with `expires`: the server holds it until a message is there, then delivers what it has up
    to `batch` and ends it with a 404/408 status), but the messages are taken straight from the
    subscription's queue: nats-py awaits each one in a task of its own under a timer (`next_msg`), a
    measurable cost per message; here only an empty queue is waited on.

    Messages an earlier request delivered after its caller stopped waiting are taken first (no new
    request then); status messages not ending this call's request are dropped, as nats-py does."""
    sub = subscription._sub
    if sub is None:
        raise ValueError("nats: invalid subscription")
    messages = _take_pending(sub, batch)
    if messages:
        return messages
    request = {"batch": batch, "expires": int(wait_s * 1_000_000_000), "no_wait": True}
    await subscription._nc.publish(subscription._nms, json.dumps(request).encode(), subscription._deliver)
    queue, loop = sub._pending_queue, asyncio.get_running_loop()
    until = loop.time() + wait_s + _EXPIRY_GRACE_S
    while len(messages) < batch:
        if not queue.empty():
            message = _taken(sub, queue.get_nowait())
        else:
            try:
                message = await _next_message(sub, until - loop.time())
            except TimeoutError:
                break
        status = message.headers.get(Header.STATUS) if message.headers else None
        if not status:
            messages.append(message)
        elif _ends_request(message, status, messages):
            break
    if not messages:
        raise nats.errors.TimeoutError
    return messages


def _ends_request(message: Msg, status: str, fetched: list[Msg]) -> bool:
    """Whether a status message ends the pull request: its end (404, 408), a conflict (409, treated as
    nats-py does: as a timeout); a heartbeat (100) does not. Any other status is an error, raised unless
    messages came before it (they are handled; the error comes back with the next request)."""
    if status in _REQUEST_ENDED:
        return True
    if status == StatusCode.CONTROL_MESSAGE:
        return False
    if fetched:
        return True
    nats.js.errors.APIError.from_msg(message)


def _take_pending(sub: Subscription, batch: int) -> list[Msg]:
    queue, messages = sub._pending_queue, list[Msg]()
    while len(messages) < batch and not queue.empty():
        message = _taken(sub, queue.get_nowait())
        if not (message.headers and message.headers.get(Header.STATUS)):
            messages.append(message)
    return messages


def _taken(sub: Subscription, message: Msg) -> Msg:
    """Book a message out of the subscription's queue as nats-py's `next_msg` does (the pending size
    decides when the connection starts dropping messages as a slow consumer's)."""
    sub._pending_size -= len(message.data)
    sub._pending_queue.task_done()
    return message


async def _next_message(sub: Subscription, wait_s: float) -> Msg:
    """Wait for the queue's next message; registered with the subscription so that closing the connection
    ends the wait, as it ends nats-py's `next_msg`."""
    if sub._conn.is_closed:
        raise nats.errors.ConnectionClosedError
    if wait_s <= 0:
        raise nats.errors.TimeoutError
    waiter = asyncio.ensure_future(sub._pending_queue.get())
    key = f"cairn-fetch-{id(waiter)}"
    sub._pending_next_msgs_calls[key] = waiter
    try:
        return _taken(sub, await asyncio.wait_for(waiter, wait_s))
    except asyncio.CancelledError:
        if sub._conn.is_closed:
            raise nats.errors.ConnectionClosedError from None
        raise
    finally:
        sub._pending_next_msgs_calls.pop(key, None)


class Consumer(Protocol):
    """What a service runs in the background: a named loop over one stream, ended by cancellation."""

    consumer: str
    stream: str

    async def run(self) -> None: ...


async def give_back(messages: Sequence[Msg], delay: float | None = None) -> None:
    for message in messages:
        await message.nak(delay=delay)


def unsettled(messages: Sequence[Msg]) -> list[Msg]:
    """The messages not yet acked, nak'd or terminated."""
    return [m for m in messages if not m.is_acked]


class PullConsumer:
    """Subclasses say what a batch means; this class fetches, dead-letters and survives outages.

    `replaces`: durable consumers of the same stream that this one takes over from (an older release read the
    stream through them). Created, this one starts at the oldest message one of them has not acked, so nothing any
    of them still owed is skipped (what they acked past that point comes again: the subclass must recognise it);
    then they are deleted. A restart between the two finds this one and only deletes them."""

    replaces: tuple[str, ...] = ()

    def __init__(
        self,
        consumer: str,
        stream: str,
        js: JetStreamContext,
        settings: NatsSettings,
        filter_subject: str | tuple[str, ...] | None = None,
    ) -> None:
        """`filter_subject`: the subjects this consumer reads (one, or several), None for the whole stream."""
        self.consumer, self.stream, self.filter_subject = consumer, stream, filter_subject
        self._js, self._settings = js, settings
        self.health = Health(f"{consumer}@{stream}")
        self.counts = counts_of(consumer, stream)
        self._retries = Backoff(settings.retry_first_s, settings.retry_cap_s)

    async def process_batch(self, messages: Sequence[Msg]) -> None:
        raise NotImplementedError

    def fetch_size(self) -> int:
        """At most how many messages one fetch takes."""
        return self._settings.fetch_batch

    async def dead_letter(self, raw: Msg, reason: str, keep_data: bool = True) -> None:
        """Park the message, with why, in the dead-letter stream; it is never redelivered. Without
        `keep_data` only the reason and where it came from are parked (for what must never be stored). Its own
        headers (trace context) are kept for a retry (`cairn dead-letters retry`), but for JetStream's."""
        delivery = Delivery.of(raw)
        log.error("dead-lettering %s seq %d in %s: %s", delivery.subject, delivery.stream_seq, self.consumer, reason)
        kept = {k: v for k, v in (raw.headers or {}).items() if keep_data and not k.lower().startswith("nats-")}
        headers = {
            **kept,
            "Cairn-Error": reason[:2000],
            "Cairn-Stream": self.stream,
            "Cairn-Stream-Seq": str(delivery.stream_seq),
            "Cairn-Subject": delivery.subject,
            "Cairn-Deliveries": str(delivery.num_delivered),
            "Nats-Msg-Id": f"{self.consumer}:{self.stream}:{delivery.stream_seq}",
        }
        data = raw.data if keep_data else b""
        parked = letter_subject(self.consumer, delivery.subject, raw.data)
        await self._js.publish(parked, data, stream=DEAD_LETTER_STREAM, headers=headers)
        await raw.term()
        self.counts.dead_lettered += 1

    async def run(self) -> None:
        """Pull in batches and handle them in order, until cancelled."""
        subscription = await self._subscribe()
        try:
            await self._let_strays_expire()
            while True:
                await self._fetch_and_process(subscription)
        finally:  # an open pull request would hold the connection's drain for its whole timeout
            with contextlib.suppress(nats.errors.Error):  # a closed connection holds no request
                await subscription.unsubscribe()

    def subjects(self) -> tuple[str, ...]:
        """The subjects this consumer reads; empty for the whole stream."""
        return (self.filter_subject,) if isinstance(self.filter_subject, str) else self.filter_subject or ()

    async def _subscribe(self) -> "JetStreamContext.PullSubscription":
        """Create the durable consumer, or bring an existing one to this code's configuration.

        JetStream keeps a durable consumer's filter from when it was created, so a release that reads
        one more subject would never be delivered that subject's events. Creating a consumer that exists
        updates its filter and `ack_wait` in place; it keeps its position, so a newly read subject's
        events from before that position are not replayed. A replica that created it meanwhile (from another
        start: a hand-over) makes the creation fail; it is then brought to this configuration as it stands."""
        try:
            await self._js.add_consumer(self.stream, await self._wanted())
        except nats.js.errors.APIError as error:  # "start sequence can not be updated" is a 500 (err_code 10012)
            log.warning("%s was created meanwhile, taking it as it stands: %s", self.consumer, error)
            await self._js.add_consumer(self.stream, await self._wanted())
        for old in self.replaces:  # only once this one holds the position they kept
            try:
                await self._js.delete_consumer(self.stream, old)
            except nats.js.errors.NotFoundError:
                continue
            log.warning("%s replaces consumer %s of %s, deleted", self.consumer, old, self.stream)
        return await self._js.pull_subscribe_bind(durable=self.consumer, stream=self.stream)

    async def _wanted(self) -> ConsumerConfig:
        """This code's configuration of the consumer; an existing one's deliver policy and start are kept
        (JetStream refuses to change them), a new one starts where the consumers it replaces stopped."""
        subjects = self.subjects()
        try:
            existing = await self._js.consumer_info(self.stream, self.consumer)
        except nats.js.errors.NotFoundError:
            existing = None
        if existing is not None:
            config = existing.config
            before = tuple(config.filter_subjects or ()) or tuple(filter(None, [config.filter_subject]))
            if sorted(before) != sorted(subjects):
                log.warning("%s now reads %s instead of %s", self.consumer, list(subjects), list(before))
            policy, start = config.deliver_policy, config.opt_start_seq
        else:
            start = await self._oldest_unacked_of_replaced()
            policy = DeliverPolicy.ALL if start is None else DeliverPolicy.BY_START_SEQUENCE
        one = subjects[0] if len(subjects) == 1 else None
        return ConsumerConfig(
            name=self.consumer,
            durable_name=self.consumer,
            deliver_policy=policy,
            opt_start_seq=start,
            ack_wait=self._settings.ack_wait_s,
            max_deliver=-1,
            filter_subject=one,
            filter_subjects=list(subjects) if len(subjects) > 1 else None,
        )

    async def _oldest_unacked_of_replaced(self) -> int | None:
        """The stream sequence after the lowest ack floor of the consumers this one replaces; None when none is
        left (a new installation: the whole stream)."""
        floors = []
        for old in self.replaces:
            try:
                info = await self._js.consumer_info(self.stream, old)
            except nats.js.errors.NotFoundError:
                continue
            floors.append(info.ack_floor.stream_seq or 0 if info.ack_floor else 0)
        if not floors:
            return None
        log.warning("%s takes over from %s at stream sequence %d", self.consumer, list(self.replaces), min(floors) + 1)
        return min(floors) + 1

    async def _let_strays_expire(self) -> None:
        """Messages a crashed holder fetched but never acked come back only after `ack_wait`, and before
        any new message; fetching new ones meanwhile would apply later events first. So wait them out."""
        info = await self._js.consumer_info(self.stream, self.consumer)
        if info.num_ack_pending:
            log.info(
                "%s waits %.0fs for %d unacked messages to come back",
                self.consumer,
                self._settings.ack_wait_s,
                info.num_ack_pending,
            )
            await asyncio.sleep(self._settings.ack_wait_s)

    async def _fetch_and_process(self, subscription: "JetStreamContext.PullSubscription") -> None:
        try:
            messages = await fetch(subscription, self.fetch_size(), wait_s=2.0)
        except TimeoutError:  # nats-py raises its own subclass or asyncio's, both builtins here
            self.health.progressed()  # caught up: nothing is owed
            return
        self.health.busy()
        self.counts.working_since = stream_time(messages[0])
        try:
            await self._process_until_settled(messages)
        except BaseException:
            # handing over (cancelled), or an unexpected error that ends the loop for its supervisor to restart:
            # what was not finished comes back at once, in order, instead of after ack_wait
            with contextlib.suppress(nats.errors.Error, OSError):
                await give_back(unsettled(messages))
            raise
        finally:
            self.health.idle()
            self.counts.working_since = None

    async def _process_until_settled(self, messages: Sequence[Msg]) -> None:
        """Process the batch; while it fails for a transient reason, hold what is unsettled and try again."""
        pending, attempt = list(messages), 0
        while True:
            try:
                await self.process_batch(pending)
            except Exception as error:
                task = asyncio.current_task()
                if task is not None and task.cancelling():  # a stop that a client turned into an error (Redis,
                    raise asyncio.CancelledError from error  # asyncpg): never held and retried as a transient one
                if not is_transient(error):
                    raise
                pending = unsettled(pending)
                if not pending:
                    return
                self.health.failing(error)
                self.counts.retried_transient += len(pending)
                delay = self._retries.delay(attempt)
                attempt += 1
                log.warning("%s holds %d messages for %.1fs (attempt %d), a transient failure: %s",
                            self.consumer, len(pending), delay, attempt, error)  # fmt: skip
                await self._hold(pending, delay)
            else:
                self.health.progressed()
                return

    async def _hold(self, messages: Sequence[Msg], delay: float) -> None:
        """Wait `delay` seconds, telling JetStream the messages are still being worked on often enough that
        `ack_wait` never runs out: they are neither redelivered nor counted as delivered again. When NATS is
        away too the progress cannot be told; a message that comes back meanwhile is recognised as applied."""
        loop = asyncio.get_running_loop()
        until = loop.time() + delay
        while True:
            try:
                for message in messages:
                    await message.in_progress()
            except (nats.errors.Error, OSError) as error:
                log.warning("%s cannot tell JetStream it still holds its batch: %s", self.consumer, error)
            left = until - loop.time()
            if left <= 0:
                return
            await asyncio.sleep(min(left, self._settings.ack_wait_s / 3))
