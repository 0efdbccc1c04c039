"""Exactly-once projections over at-least-once delivery.

A projection applies the events of one stream to its service's tables. For each message it records
`(consumer, event_id)` and the events the handler emits (the outbox) in the same transaction as the
rows, publishes the emitted events, and acks only then. A redelivered event finds its record and only
re-publishes its outbox (JetStream drops the duplicates by message id). Undecodable messages, and
messages that keep failing, go to the dead-letter stream with the error.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import nats.errors
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind
from pydantic import ValidationError

from cairn.events import DEAD_LETTER_STREAM, Event, dead_letter_subject, decode_event, event_adapter
from cairn.platform.postgres import tenant_transaction
from cairn.platform.publisher import EventPublisher
from cairn.platform.settings import NatsSettings

log = logging.getLogger(__name__)
_tracer = trace.get_tracer("cairn.consumer")

Connection = Any  # an asyncpg connection inside a tenant transaction
Handler = Callable[[Connection, Any, "Delivery"], Awaitable[Sequence[Event]]]

MARK_PROCESSED = """
INSERT INTO cairn.processed_events (consumer, event_id, tenant_id) VALUES ($1, $2, $3)
ON CONFLICT DO NOTHING
"""
SAVE_OUTBOX = "INSERT INTO cairn.outbox (consumer, causation_id, seq, tenant_id, event) VALUES ($1, $2, $3, $4, $5)"
LOAD_OUTBOX = "SELECT event FROM cairn.outbox WHERE consumer = $1 AND causation_id = $2 ORDER BY seq"


@dataclass(frozen=True)
class Delivery:
    """Where a message sits in its stream: handlers use the sequence for read-your-writes positions."""

    stream_seq: int
    num_delivered: int
    subject: str


class Projection:
    def __init__(
        self,
        consumer: str,
        stream: str,
        handlers: Mapping[type, Handler],
        pool: "asyncpg.Pool[asyncpg.Record]",
        publisher: EventPublisher,
        settings: NatsSettings,
    ) -> None:
        self.consumer, self.stream = consumer, stream
        self._handlers, self._pool, self._publisher = handlers, pool, publisher
        self._settings = settings

    async def process_batch(self, messages: Sequence[Msg]) -> None:
        """In stream order, one at a time: events of one session must be applied in order."""
        for raw in messages:
            with _tracer.start_as_current_span(
                f"{self.consumer} process",
                context=propagate.extract(raw.headers or {}),
                kind=SpanKind.CONSUMER,
            ):
                await self.process(raw)

    async def process(self, raw: Msg) -> None:
        meta = raw.metadata
        delivery = Delivery(meta.sequence.stream, meta.num_delivered, raw.subject)
        try:
            event = decode_event(raw.data)
        except ValidationError as error:
            await self._dead_letter(raw, delivery, f"undecodable event: {error}")
            return
        handler = self._handlers.get(type(event))
        if handler is None:
            await raw.ack()
            return
        try:
            emitted = await self._apply(event, handler, delivery)
            await self._publisher.publish_all(emitted)
        except Exception as error:  # any failure: retry with backoff, then dead-letter with the reason
            if delivery.num_delivered >= self._settings.max_deliver:
                await self._dead_letter(raw, delivery, f"{type(error).__name__}: {error}")
                return
            log.warning("retrying %s in %s: %s", event.event_id, self.consumer, error)
            await raw.nak(delay=min(0.2 * 2**delivery.num_delivered, 10.0))
            return
        await raw.ack()

    async def _apply(self, event: Event, handler: Handler, delivery: Delivery) -> Sequence[Event]:
        async with tenant_transaction(self._pool, event.tenant_id) as conn:
            inserted = await conn.execute(MARK_PROCESSED, self.consumer, event.event_id, event.tenant_id)
            if inserted == "INSERT 0 0":
                rows = await conn.fetch(LOAD_OUTBOX, self.consumer, event.event_id)
                return [event_adapter.validate_json(row["event"]) for row in rows]
            emitted = await handler(conn, event, delivery)
            for seq, out in enumerate(emitted):
                payload = event_adapter.dump_json(out).decode()
                await conn.execute(SAVE_OUTBOX, self.consumer, event.event_id, seq, event.tenant_id, payload)
            return emitted

    async def _dead_letter(self, raw: Msg, delivery: Delivery, reason: str) -> None:
        log.error("dead-lettering %s seq %d in %s: %s", delivery.subject, delivery.stream_seq, self.consumer, reason)
        headers = {
            "Cairn-Error": reason[:2000],
            "Cairn-Stream": self.stream,
            "Cairn-Stream-Seq": str(delivery.stream_seq),
            "Cairn-Subject": delivery.subject,
            "Cairn-Deliveries": str(delivery.num_delivered),
            "Nats-Msg-Id": f"{self.consumer}:{self.stream}:{delivery.stream_seq}",
        }
        await self._publisher.js.publish(
            dead_letter_subject(self.consumer), raw.data, stream=DEAD_LETTER_STREAM, headers=headers
        )
        await raw.term()

    async def run(self) -> None:
        """Pull in batches and apply them in order, until cancelled.

        Not a FastStream subscriber on purpose: its pull subscriber runs the messages of one fetch
        concurrently (breaking per-session order), and its batch mode re-fetches with shrinking
        timeouts, racing pull-request expiry so that messages sit unseen until `ack_wait` (seen as
        5-second stalls). A plain loop with one long fetch at a time has neither problem.
        """
        subscription = await self._publisher.js.pull_subscribe(
            "cairn.>",
            durable=self.consumer,
            stream=self.stream,
            config=ConsumerConfig(ack_wait=self._settings.ack_wait_s, max_deliver=-1),
        )
        while True:
            try:
                messages = await subscription.fetch(self._settings.fetch_batch, timeout=2.0)
            except nats.errors.TimeoutError:
                continue
            try:
                await self.process_batch(messages)
            except (OSError, asyncpg.PostgresError, nats.errors.Error) as error:
                # Unacked messages come back after ack_wait; pause so an outage is not a busy loop.
                log.error("%s could not process a batch, will retry: %s", self.consumer, error)
                await asyncio.sleep(1.0)
