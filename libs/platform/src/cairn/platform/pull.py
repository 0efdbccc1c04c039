"""Durable JetStream pull consumers: one long fetch at a time, batches handled in stream order, dead
letters with the reason.

Not a FastStream subscriber on purpose: its pull subscriber runs the messages of one fetch
concurrently (breaking per-session order), and its batch mode re-fetches with shrinking timeouts,
racing pull-request expiry so that messages sit unseen until `ack_wait` (seen as 5-second stalls).
"""

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import asyncpg
import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig

from cairn.events import DEAD_LETTER_STREAM, dead_letter_subject
from cairn.platform.settings import NatsSettings

log = logging.getLogger(__name__)

_V1_TOKENS, _V2_MIN_TOKENS = 9, 11  # ack subjects without and with domain + account hash (+ a random token)


@dataclass(frozen=True)
class Delivery:
    """Where a message sits in its stream: handlers use the sequence for read-your-writes positions."""

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


class Consumer(Protocol):
    """What a service runs in the background: a named loop over one stream, ended by cancellation."""

    consumer: str
    stream: str

    async def run(self) -> None: ...


async def give_back(messages: Sequence[Msg], delay: float | None = None) -> None:
    for message in messages:
        await message.nak(delay=delay)


class PullConsumer:
    """Subclasses say what a batch means; this class fetches, dead-letters and survives outages."""

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

    async def process_batch(self, messages: Sequence[Msg]) -> None:
        raise NotImplementedError

    def fetch_size(self) -> int:
        """At most how many messages one fetch takes."""
        return self._settings.fetch_batch

    async def dead_letter(self, raw: Msg, reason: str, keep_data: bool = True) -> None:
        """Park the message, with why, in the dead-letter stream; it is never redelivered. Without
        `keep_data` only the reason and where it came from are parked (for what must never be stored)."""
        delivery = Delivery.of(raw)
        log.error("dead-lettering %s seq %d in %s: %s", delivery.subject, delivery.stream_seq, self.consumer, reason)
        headers = {
            "Cairn-Error": reason[:2000],
            "Cairn-Stream": self.stream,
            "Cairn-Stream-Seq": str(delivery.stream_seq),
            "Cairn-Subject": delivery.subject,
            "Cairn-Deliveries": str(delivery.num_delivered),
            "Nats-Msg-Id": f"{self.consumer}:{self.stream}:{delivery.stream_seq}",
        }
        data = raw.data if keep_data else b""
        await self._js.publish(dead_letter_subject(self.consumer), data, stream=DEAD_LETTER_STREAM, headers=headers)
        await raw.term()

    async def run(self) -> None:
        """Pull in batches and handle them in order, until cancelled."""
        subscription = await self._subscribe()
        try:
            await self._let_strays_expire()
            while True:
                await self._fetch_and_process(subscription)
        finally:  # an open pull request would hold the connection's drain for its whole timeout
            await subscription.unsubscribe()

    def subjects(self) -> tuple[str, ...]:
        """The subjects this consumer reads; empty for the whole stream."""
        return (self.filter_subject,) if isinstance(self.filter_subject, str) else self.filter_subject or ()

    async def _subscribe(self) -> "JetStreamContext.PullSubscription":
        """Create the durable consumer, or bring an existing one to this code's configuration.

        JetStream keeps a durable consumer's filter from when it was created, so a release that reads
        one more subject would never be delivered that subject's events. Creating a consumer that exists
        updates its filter and `ack_wait` in place; it keeps its position, so a newly read subject's
        events from before that position are not replayed."""
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
        one = subjects[0] if len(subjects) == 1 else None
        wanted = ConsumerConfig(
            name=self.consumer,
            durable_name=self.consumer,
            ack_wait=self._settings.ack_wait_s,
            max_deliver=-1,
            filter_subject=one,
            filter_subjects=list(subjects) if len(subjects) > 1 else None,
        )
        await self._js.add_consumer(self.stream, wanted)
        return await self._js.pull_subscribe_bind(durable=self.consumer, stream=self.stream)

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
            messages = await subscription.fetch(self.fetch_size(), timeout=2.0)
        except TimeoutError:  # nats-py raises its own subclass or asyncio's, both builtins here
            return
        try:
            await self.process_batch(messages)
        except asyncio.CancelledError:  # handing over: what we did not finish comes back at once, in order
            await give_back([m for m in messages if not m.is_acked])
            raise
        except (OSError, asyncpg.PostgresError, nats.errors.Error) as error:
            # Unacked messages come back after ack_wait; pause so an outage is not a busy loop.
            log.error("%s could not process a batch, will retry: %s", self.consumer, error)
            await asyncio.sleep(1.0)
