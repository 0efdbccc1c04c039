"""Exactly-once projections over at-least-once delivery.

A projection applies the events of one stream to its service's tables. For each event it records
`(consumer, event_id)` and the events the handler emits (the outbox) in the same transaction as the
rows, publishes the emitted events after commit, and acks only then. A redelivered event finds its
record and only re-publishes its outbox (JetStream drops the duplicates by message id). Undecodable
messages, events a handler calls poison, and messages that keep failing go to the dead-letter stream
with the error.

A fetched batch is applied in stream order, consecutive events of one tenant in one transaction (one
commit and one publish round instead of one per event); when such a group fails, its events are
retried one by one so that only the failing event is retried and, in the end, dead-lettered.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any

import asyncpg
from nats.aio.msg import Msg
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind
from pydantic import ValidationError

from cairn.events import Event, decode_event, event_adapter
from cairn.platform.postgres import tenant_transaction
from cairn.platform.publisher import EventPublisher, Outgoing
from cairn.platform.pull import Delivery, PullConsumer, give_back
from cairn.platform.settings import NatsSettings

__all__ = ["Delivery", "Handler", "PoisonEvent", "Projection"]

log = logging.getLogger(__name__)
_tracer = trace.get_tracer("cairn.consumer")

Connection = Any  # an asyncpg connection inside a tenant transaction
Handler = Callable[[Connection, Any, Delivery], Awaitable[Sequence[Event]]]

MARK_PROCESSED = """
INSERT INTO cairn.processed_events (consumer, event_id, tenant_id) VALUES ($1, $2, $3)
ON CONFLICT DO NOTHING
"""
SAVE_OUTBOX = "INSERT INTO cairn.outbox (consumer, causation_id, seq, tenant_id, event) VALUES ($1, $2, $3, $4, $5)"
LOAD_OUTBOX = "SELECT event FROM cairn.outbox WHERE consumer = $1 AND causation_id = $2 ORDER BY seq"


class PoisonEvent(Exception):
    """Raised by a handler for an event that can never be applied (it breaks a rule its producer should
    have enforced): the event is dead-lettered at once with this reason instead of being retried."""


@dataclass(frozen=True)
class _Work:
    raw: Msg
    delivery: Delivery
    event: Event
    handler: Handler


class Projection(PullConsumer):
    def __init__(
        self,
        consumer: str,
        stream: str,
        handlers: Mapping[type, Handler],
        pool: "asyncpg.Pool[asyncpg.Record]",
        publisher: EventPublisher,
        settings: NatsSettings,
        filter_subject: str | None = None,
    ) -> None:
        super().__init__(consumer, stream, publisher.js, settings, filter_subject)
        self._handlers, self._pool, self._publisher = handlers, pool, publisher

    async def process_batch(self, messages: Sequence[Msg]) -> None:
        """In stream order: events of one session must be applied in order, so when an event has to be
        retried, the rest of the batch goes back with it instead of overtaking it."""
        work = [item for raw in messages if (item := await self._decode(raw)) is not None]
        groups = [list(group) for _, group in groupby(work, key=lambda w: w.event.tenant_id)]
        for index, group in enumerate(groups):
            if not await self._apply_group(group):
                delay = self._retry_delay(group[0].delivery)
                await give_back([item.raw for later in groups[index + 1 :] for item in later], delay)
                # fetching before the retries are due would hand out newer events first
                await asyncio.sleep(delay)
                return

    async def _decode(self, raw: Msg) -> _Work | None:
        delivery = Delivery.of(raw)
        try:
            event = decode_event(raw.data)
        except ValidationError as error:
            await self.dead_letter(raw, f"undecodable event: {error}")
            return None
        handler = self._handlers.get(type(event))
        if handler is None:
            await raw.ack()
            return None
        return _Work(raw, delivery, event, handler)

    async def _apply_group(self, group: list[_Work]) -> bool:
        """True when every event was applied (or dead-lettered); False when one goes back for a retry."""
        if len(group) == 1:
            return await self._apply_one(group[0])
        try:
            async with tenant_transaction(self._pool, group[0].event.tenant_id) as conn:
                outgoing = [out for item in group for out in await self._apply(conn, item)]
            await self._publisher.publish_outgoing(outgoing)
        except Exception:  # isolate the failing event: the group rolled back, apply it one event at a time
            for index, item in enumerate(group):
                if not await self._apply_one(item):
                    await give_back([later.raw for later in group[index + 1 :]], self._retry_delay(item.delivery))
                    return False
            return True
        for item in group:
            await item.raw.ack()
        return True

    async def _apply(self, conn: Connection, item: _Work) -> list[Outgoing]:
        """Apply one event; the emitted events carry the trace context of the event that caused them."""
        event = item.event
        context = propagate.extract(item.raw.headers or {})
        with _tracer.start_as_current_span(f"{self.consumer} {event.type}", context=context, kind=SpanKind.CONSUMER):
            inserted = await conn.execute(MARK_PROCESSED, self.consumer, event.event_id, event.tenant_id)
            if inserted == "INSERT 0 0":  # a redelivery: only re-publish what it emitted the first time
                rows = await conn.fetch(LOAD_OUTBOX, self.consumer, event.event_id)
                emitted: Sequence[Event] = [event_adapter.validate_json(row["event"]) for row in rows]
            else:
                emitted = await item.handler(conn, event, item.delivery)
                for seq, out in enumerate(emitted):
                    payload = event_adapter.dump_json(out).decode()
                    await conn.execute(SAVE_OUTBOX, self.consumer, event.event_id, seq, event.tenant_id, payload)
            return [Outgoing(out, self._publisher.trace_headers()) for out in emitted]

    async def _apply_one(self, item: _Work) -> bool:
        try:
            async with tenant_transaction(self._pool, item.event.tenant_id) as conn:
                outgoing = await self._apply(conn, item)
            await self._publisher.publish_outgoing(outgoing)
        except PoisonEvent as poison:
            await self.dead_letter(item.raw, f"poison event: {poison}")
            return True
        except Exception as error:  # any failure: retry with backoff, then dead-letter with the reason
            if item.delivery.num_delivered >= self._settings.max_deliver:
                await self.dead_letter(item.raw, f"{type(error).__name__}: {error}")
                return True
            log.warning("retrying %s in %s: %s", item.event.event_id, self.consumer, error)
            await item.raw.nak(delay=self._retry_delay(item.delivery))
            return False
        await item.raw.ack()
        return True

    @staticmethod
    def _retry_delay(delivery: Delivery) -> float:
        return float(min(0.2 * 2**delivery.num_delivered, 10.0))
