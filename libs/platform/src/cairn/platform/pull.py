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

import asyncpg
import nats.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig

from cairn.events import DEAD_LETTER_STREAM, dead_letter_subject
from cairn.platform.settings import NatsSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Delivery:
    """Where a message sits in its stream: handlers use the sequence for read-your-writes positions."""

    stream_seq: int
    num_delivered: int
    subject: str

    @classmethod
    def of(cls, raw: Msg) -> "Delivery":
        meta = raw.metadata
        return cls(meta.sequence.stream, meta.num_delivered, raw.subject)


class PullConsumer:
    """Subclasses say what a batch means; this class fetches, dead-letters and survives outages."""

    def __init__(self, consumer: str, stream: str, js: JetStreamContext, settings: NatsSettings) -> None:
        self.consumer, self.stream = consumer, stream
        self._js, self._settings = js, settings

    async def process_batch(self, messages: Sequence[Msg]) -> None:
        raise NotImplementedError

    async def dead_letter(self, raw: Msg, reason: str) -> None:
        """Park the message, with why, in the dead-letter stream; it is never redelivered."""
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
        await self._js.publish(dead_letter_subject(self.consumer), raw.data, stream=DEAD_LETTER_STREAM, headers=headers)
        await raw.term()

    async def run(self) -> None:
        """Pull in batches and handle them in order, until cancelled."""
        subscription = await self._js.pull_subscribe(
            "",
            durable=self.consumer,
            stream=self.stream,
            config=ConsumerConfig(ack_wait=self._settings.ack_wait_s, max_deliver=-1),
        )
        try:
            while True:
                await self._fetch_and_process(subscription)
        finally:  # an open pull request would hold the connection's drain for its whole timeout
            await subscription.unsubscribe()

    async def _fetch_and_process(self, subscription: "JetStreamContext.PullSubscription") -> None:
        try:
            messages = await subscription.fetch(self._settings.fetch_batch, timeout=2.0)
        except TimeoutError:  # nats-py raises its own subclass or asyncio's, both builtins here
            return
        try:
            await self.process_batch(messages)
        except (OSError, asyncpg.PostgresError, nats.errors.Error) as error:
            # Unacked messages come back after ack_wait; pause so an outage is not a busy loop.
            log.error("%s could not process a batch, will retry: %s", self.consumer, error)
            await asyncio.sleep(1.0)
