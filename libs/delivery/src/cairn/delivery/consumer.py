"""Exactly-once projections over at-least-once delivery.

A projection applies the events of one stream to its service's tables. For each event it records
`(consumer, event_id)` and the events the handler emits (the outbox) in the same transaction as the
rows, publishes the emitted events after commit, and acks only then. A redelivered event finds its
record and only re-publishes its outbox (JetStream drops the duplicates by message id).

Failures are told apart by `faults.classify`. A transient one (Postgres restarting, a dropped connection, a
serialization failure, NATS away) leaves the batch to the pull loop, which holds it and retries it for as
long as the failure lasts (pull.py): never dead-lettered, no delivery spent. A deterministic one (undecodable,
a `PoisonEvent`, a value or constraint Postgres refuses) is isolated and dead-lettered at once with the
reason; any other failure is retried up to `max_deliver` deliveries, then dead-lettered.

A fetched batch is applied set-based in one transaction: one statement, sent with the BEGIN, records every event
as processed, one stores every outbox row, and the handlers may buffer their own writes in a `Unit` that writes
them all just before the commit. Handlers that name every row's tenant (`across_tenants`) get the whole batch in one
transaction when the pool logs in as cairn_projector (`tenants_transaction`); all others get one transaction
per tenant, each tenant's events in stream order. When a batch fails other than transiently it is retried per
tenant, and a tenant's group one event at a time, so that only the failing event is retried or dead-lettered
while the other events of its batch, its tenant's included, are applied.
"""

import asyncio
import contextlib
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

import asyncpg
from nats.aio.msg import Msg
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind
from pydantic import ValidationError

from cairn.delivery.faults import Fault, PoisonEvent, classify, describe, is_transient
from cairn.delivery.publisher import EventPublisher, Outgoing
from cairn.delivery.pull import Delivery, PullConsumer, give_back
from cairn.delivery.settings import NatsSettings
from cairn.delivery.trace_context import handed_on, recording
from cairn.events import Event, decode_event, event_adapter
from cairn.storage.postgres import is_projector, opening_with

__all__ = [
    "BatchHandlers", "Delivery", "Handler", "Part", "PerEvent", "PoisonEvent", "Projection", "Unit",
]  # fmt: skip

log = logging.getLogger(__name__)
T = TypeVar("T")


def by_size(items: Sequence[T], size: Callable[[T], int], limit: int) -> Iterator[list[T]]:
    """Consecutive runs of `items` of at most `limit` in total `size` each; an item larger than `limit` is a
    run of its own."""
    run: list[T] = []
    total = 0
    for item in items:
        if run and total + size(item) > limit:
            yield run
            run, total = [], 0
        run.append(item)
        total += size(item)
    if run:
        yield run


_tracer = trace.get_tracer("cairn.consumer")

Connection = Any  # an asyncpg connection inside a tenant transaction
Handler = Callable[[Connection, Any, Delivery], Awaitable[Sequence[Event]]]

# Records a batch's events as processed in the transaction's opening round trip (`opening_with`): a simple query,
# so the values are literals — the consumer's name quoted by `_literal`, the ids in array literals (`_uuids`). Its
# status counts the new rows; duplicates inside one statement are fine with DO NOTHING.
MARK_PROCESSED = """
INSERT INTO cairn.processed_events (consumer, event_id, tenant_id)
SELECT {consumer}, event_id, tenant_id
FROM unnest('{{{events}}}'::uuid[], '{{{tenants}}}'::uuid[]) AS e(event_id, tenant_id)
ON CONFLICT DO NOTHING
"""
_UUID_LIST = re.compile(r"[0-9a-fA-F-]{36}(?:,[0-9a-fA-F-]{36})*")
# Which of them this transaction recorded, when the count says only some are new: rows it wrote carry its id.
NEWLY_PROCESSED = """
SELECT event_id FROM cairn.processed_events
WHERE consumer = $1 AND event_id = ANY($2::uuid[]) AND xmin = pg_current_xact_id()::xid
"""
# Each event as the text it is published as (cairn.outbox.event is text): Postgres stores it without parsing it.
SAVE_OUTBOX = """
INSERT INTO cairn.outbox (consumer, causation_id, seq, tenant_id, event)
SELECT $1, causation_id, seq, tenant_id, event
FROM unnest($2::uuid[], $3::int[], $4::uuid[], $5::text[]) AS o(causation_id, seq, tenant_id, event)
"""
# The same for a projection that feeds several (`Projection.merged`): each event is recorded under the name of each
# projection that handles it, as that projection alone would record it. Names are quoted by `_names`.
MARK_PROCESSED_OF = """
INSERT INTO cairn.processed_events (consumer, event_id, tenant_id)
SELECT consumer, event_id, tenant_id
FROM unnest('{{{consumers}}}'::text[], '{{{events}}}'::uuid[], '{{{tenants}}}'::uuid[])
    AS e(consumer, event_id, tenant_id)
ON CONFLICT DO NOTHING
"""
NEWLY_PROCESSED_OF = """
SELECT consumer, event_id FROM cairn.processed_events
WHERE consumer = ANY($1::text[]) AND event_id = ANY($2::uuid[]) AND xmin = pg_current_xact_id()::xid
"""
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
LOAD_OUTBOX = """
SELECT causation_id, event FROM cairn.outbox WHERE consumer = $1 AND causation_id = ANY($2::uuid[])
ORDER BY causation_id, seq
"""


class Unit(Protocol):
    """The handlers' work inside one transaction: `handle` is called for each new event in stream order and
    may buffer writes; `complete` writes what is buffered, before the commit."""

    async def handle(self, event: Event, delivery: Delivery) -> Sequence[Event]: ...

    async def complete(self) -> None: ...


class BatchHandlers(Protocol):
    """What a projection applies: which events it handles, and a unit of work over a tenant's events, or over
    several tenants' events (in stream order) when `across_tenants` says every statement names its rows' tenant."""

    across_tenants: bool

    def handles(self, event: Event) -> bool: ...

    def begin(self, conn: Connection, events: Sequence[Event]) -> Unit: ...


class PerEvent:
    """Plain handlers, one per event type, each writing as it goes: one tenant per transaction, unless every
    statement of theirs names its tenant and the tables they touch admit tenant sets (`across_tenants`)."""

    def __init__(self, handlers: Mapping[type, Handler], across_tenants: bool = False) -> None:
        self._handlers, self.across_tenants = handlers, across_tenants

    def handles(self, event: Event) -> bool:
        return type(event) in self._handlers

    def begin(self, conn: Connection, events: Sequence[Event]) -> Unit:
        return _PerEventUnit(conn, self._handlers)


class _PerEventUnit:
    def __init__(self, conn: Connection, handlers: Mapping[type, Handler]) -> None:
        self._conn, self._handlers = conn, handlers

    async def handle(self, event: Event, delivery: Delivery) -> Sequence[Event]:
        return await self._handlers[type(event)](self._conn, event, delivery)

    async def complete(self) -> None:
        return None


@dataclass(frozen=True)
class Part:
    """One projection fed by a consumer that feeds several (`Projection.merged`): its `name` is what it records its
    applied events and its outbox under, the name its own consumer had."""

    name: str
    handlers: BatchHandlers


def _payload_bytes(item: "_Work") -> int:
    return len(item.raw.data)


class _Work(NamedTuple):  # one per message: a named tuple costs half a frozen dataclass
    raw: Msg
    delivery: Delivery
    event: Event


class _KnownContexts:
    """The trace headers handed on, once per distinct trace context in a batch: the events of one ingest request
    share theirs, and extracting then injecting it is a cost per event. The result depends only on the headers the
    propagators read (their `fields`, looked up once); the events share the dict (publishing copies it)."""

    __slots__ = ("_carried", "_fields")

    def __init__(self) -> None:
        self._fields: list[str] | None = None
        self._carried: dict[tuple[str | None, ...], dict[str, str]] = {}

    def handed_on(self, headers: Mapping[str, str] | None) -> dict[str, str]:
        if self._fields is None:
            self._fields = sorted(propagate.get_global_textmap().fields)
        key = tuple((headers or {}).get(name) for name in self._fields)
        carried = self._carried.get(key)
        if carried is None:
            carried = self._carried[key] = handed_on(headers)
        return carried


class _HandedOn:
    """The trace headers an event hands on to the events it causes, worked out on first use (a plain class:
    `functools.cache` builds a wrapper that costs more than the saving)."""

    __slots__ = ("_carried", "_headers", "_known")

    def __init__(self, headers: Mapping[str, str] | None, known: _KnownContexts) -> None:
        self._headers, self._known = headers, known
        self._carried: dict[str, str] | None = None

    def __call__(self) -> dict[str, str]:
        if self._carried is None:
            self._carried = self._known.handed_on(self._headers)
        return self._carried


class Projection(PullConsumer):
    def __init__(
        self,
        consumer: str,
        stream: str,
        handlers: Mapping[type, Handler] | BatchHandlers,
        pool: "asyncpg.Pool[asyncpg.Record]",
        publisher: EventPublisher,
        settings: NatsSettings,
        filter_subject: str | tuple[str, ...] | None = None,
    ) -> None:
        super().__init__(consumer, stream, publisher.js, settings, filter_subject)
        one = PerEvent(handlers) if isinstance(handlers, Mapping) else handlers
        self._parts: tuple[Part, ...] = (Part(consumer, one),)
        self._pool, self._publisher = pool, publisher
        self._across: bool | None = None

    @classmethod
    def merged(
        cls,
        consumer: str,
        stream: str,
        parts: Sequence[Part],
        pool: "asyncpg.Pool[asyncpg.Record]",
        publisher: EventPublisher,
        settings: NatsSettings,
        replaces: Sequence[str] = (),
    ) -> "Projection":
        """One consumer of `stream` feeding several projections: one fetch, one transaction and one ack per batch
        for all of them. Each part records the events it applied under its own name, as its own consumer did, so an
        event one part applied before (through its old consumer, or in a batch that was redelivered) is skipped by
        that part and still applied by the others. `replaces`: the parts' old durable consumers of `stream`; when
        this one is first created it starts at the oldest event one of them has not acked, and they are deleted."""
        if not parts:
            raise ValueError("a merged projection needs at least one part")
        projection = cls(consumer, stream, parts[0].handlers, pool, publisher, settings)
        projection._parts = tuple(parts)
        projection.replaces = tuple(replaces)
        return projection

    @property
    def recording_names(self) -> tuple[str, ...]:
        """The names it records applied events (and outbox rows) under: its own, or each part's when merged."""
        return tuple(part.name for part in self._parts)

    async def process_batch(self, messages: Sequence[Msg]) -> None:
        """In stream order per tenant: events of one session must be applied in order, so when an event has
        to be retried, the rest of its tenant's events go back with it instead of overtaking it. Tenants are
        independent, so each tenant's events form one group wherever they sit in the batch, and one tenant's
        failing event holds back no other tenant's. A transient failure is raised for the pull loop to hold.

        A fetched batch is applied in slices of at most `batch_bytes` of events, each its own transaction,
        acked at its commit: a batch of large messages never becomes one transaction whose statements
        approach the statement timeout, and what is applied becomes searchable slice by slice."""
        work = [item for raw in messages if (item := await self._decode(raw)) is not None]
        held: dict[str, float] = {}  # tenant → when its event that went back is retried
        touched = asyncio.get_running_loop().time()
        for index, part in enumerate(by_size(work, _payload_bytes, self._settings.batch_bytes)):
            if index:
                touched = await self._still_working(work, touched)
            for item in part:  # a held tenant's later events go back behind the one being retried
                if item.event.tenant_id in held:
                    await item.raw.nak(delay=held[item.event.tenant_id])
            held |= await self._apply_slice([item for item in part if item.event.tenant_id not in held])
        if held:  # fetching before the retries are due would hand out the retried tenants' newer events first
            await asyncio.sleep(max(held.values()))

    async def _apply_slice(self, work: list[_Work]) -> dict[str, float]:
        """Apply a slice in one transaction, or per tenant after a failure; returns the tenants whose event went
        back for a retry, with its delay."""
        if len(work) > 1 and await self._across_tenants():
            try:
                await self._publisher.publish_outgoing(await self._apply(work))
            except Exception as error:  # the slice rolled back: apply it per tenant, a failing tenant event by event
                if is_transient(error):
                    raise
                log.warning("%s applies a batch of %d per tenant after %s", self.consumer, len(work), describe(error))
            else:
                for item in work:
                    await item.raw.ack()
                self.counts.applied += len(work)
                return {}
        groups: dict[str, list[_Work]] = {}
        for item in work:
            groups.setdefault(item.event.tenant_id, []).append(item)
        return {
            tenant: self._retry_delay(group[0].delivery)
            for tenant, group in groups.items()
            if not await self._apply_group(group)
        }

    async def _still_working(self, work: Sequence[_Work], touched: float) -> float:
        """Tell JetStream the batch's unsettled events are still being worked on once a third of `ack_wait` has
        passed since it last heard, so that slices applied one after another never outlast it."""
        now = asyncio.get_running_loop().time()
        if now - touched < self._settings.ack_wait_s / 3:
            return touched
        for item in work:
            if not item.raw.is_acked:
                await item.raw.in_progress()
        return now

    def fetch_size(self) -> int:
        return self._settings.bulk_fetch_batch if self._across else self._settings.fetch_batch

    async def _across_tenants(self) -> bool:
        """Whether batches go in one transaction: handlers that allow it, on a pool whose role may (asked once)."""
        if self._across is None:
            across = all(part.handlers.across_tenants for part in self._parts)
            self._across = across and await is_projector(self._pool)
        return self._across

    async def _decode(self, raw: Msg) -> _Work | None:
        delivery = Delivery.of(raw)
        try:
            event = decode_event(raw.data)
        except ValidationError as error:
            await self.dead_letter(raw, f"undecodable event: {error}")
            return None
        if not any(part.handlers.handles(event) for part in self._parts):
            await raw.ack()
            return None
        return _Work(raw, delivery, event)

    async def _apply_group(self, group: list[_Work]) -> bool:
        """True when every event was applied (or dead-lettered); False when one goes back for a retry."""
        if len(group) == 1:
            return await self._apply_one(group[0])
        try:
            await self._publisher.publish_outgoing(await self._apply(group))
        except Exception as error:  # isolate the failing event: the group rolled back, apply it one event at a time
            if is_transient(error):
                raise
            for index, item in enumerate(group):
                if not await self._apply_one(item):
                    await give_back([later.raw for later in group[index + 1 :]], self._retry_delay(item.delivery))
                    return False
            return True
        for item in group:
            await item.raw.ack()
        self.counts.applied += len(group)
        return True

    async def _apply(self, group: Sequence[_Work]) -> list[Outgoing]:
        """Apply events in one transaction, for each part that handles them and has not applied them before;
        returns what to publish, in stream order (an event's by part, in the parts' order)."""
        tenants = {item.event.tenant_id for item in group}
        emitted: dict[str, dict[str, list[Outgoing]]] = {}  # part → event id → what it emitted now
        firsts: dict[str, dict[str, _Work]] = {}  # part → event id → the event's first occurrence, when new
        stored: dict[str, dict[str, list[Event]]] = {}  # part → event id → what it emitted the first time
        async with opening_with(self._pool, tenants, self._mark_processed(group)) as (conn, marked):
            new = await self._newly_processed(conn, group, marked)
            for part in self._parts:
                ids = [item.event.event_id for item in group if part.handlers.handles(item.event)]
                first: dict[str, _Work] = {}
                for item in group:
                    if item.event.event_id in new[part.name] and part.handlers.handles(item.event):
                        first.setdefault(item.event.event_id, item)
                firsts[part.name] = first
                emitted[part.name] = await self._handle(conn, part.handlers, list(first.values()))
                await self._save_outbox(conn, part.name, first, emitted[part.name])
                seen = [i for i in ids if i not in new[part.name]]
                stored[part.name] = await self._load_outbox(conn, part.name, seen)
        outgoing: list[Outgoing] = []
        for item in group:
            event_id = item.event.event_id
            for part in self._parts:
                if not part.handlers.handles(item.event):
                    continue
                now = emitted[part.name]
                if firsts[part.name].get(event_id) is item:
                    outgoing += now[event_id]
                    continue
                # seen before, here or in an earlier transaction: only re-publish what it emitted the first time
                again = [o.event for o in now[event_id]] if event_id in now else stored[part.name].get(event_id, [])
                if again:
                    with self._span(item, recording(), _KnownContexts()) as headers:
                        outgoing += [Outgoing(event, headers()) for event in again]
        return outgoing

    def _mark_processed(self, group: Sequence[_Work]) -> str:
        if len(self._parts) == 1:
            events, tenants = _uuids(i.event.event_id for i in group), _uuids(i.event.tenant_id for i in group)
            return MARK_PROCESSED.format(consumer=_literal(self.consumer), events=events, tenants=tenants)
        marks = [(part.name, item.event) for item in group for part in self._parts if part.handlers.handles(item.event)]
        return MARK_PROCESSED_OF.format(
            consumers=_names(name for name, _ in marks),
            events=_uuids(event.event_id for _, event in marks),
            tenants=_uuids(event.tenant_id for _, event in marks),
        )

    async def _newly_processed(self, conn: Connection, group: Sequence[_Work], marked: str) -> dict[str, set[str]]:
        """For each part, the ids `_mark_processed` recorded (its status "INSERT 0 <new rows>"); the rest were
        processed before. Usually all or none are new, which the count tells; otherwise one more statement finds
        them."""
        handled = {p.name: {i.event.event_id for i in group if p.handlers.handles(i.event)} for p in self._parts}
        inserted = int(marked.rsplit(" ", 1)[1])
        if inserted == 0:
            return {name: set() for name in handled}
        if inserted == sum(len(ids) for ids in handled.values()):
            return handled
        distinct = list({i for ids in handled.values() for i in ids})
        if len(self._parts) == 1:
            rows = await conn.fetch(NEWLY_PROCESSED, self.consumer, distinct)
            recorded = {(self.consumer, str(row["event_id"])) for row in rows}
        else:
            rows = await conn.fetch(NEWLY_PROCESSED_OF, list(handled), distinct)
            recorded = {(row["consumer"], str(row["event_id"])) for row in rows}
        return {name: {i for i in ids if (name, str(uuid.UUID(i))) in recorded} for name, ids in handled.items()}

    async def _handle(
        self, conn: Connection, handlers: BatchHandlers, items: Sequence[_Work]
    ) -> dict[str, list[Outgoing]]:
        """Run the handlers over the new events; each emitted event carries the trace context of its cause."""
        emitted: dict[str, list[Outgoing]] = {}
        if not items and len(self._parts) > 1:
            return emitted  # this part has applied them all before: nothing to begin
        unit = handlers.begin(conn, [item.event for item in items])
        recorded, known = recording(), _KnownContexts()
        for item in items:
            with self._span(item, recorded, known) as headers:
                events = await unit.handle(item.event, item.delivery)
                emitted[item.event.event_id] = [Outgoing(e, headers()) for e in events]
        await unit.complete()
        return emitted

    def _span(
        self, item: _Work, recorded: bool, known: _KnownContexts
    ) -> contextlib.AbstractContextManager[Callable[[], dict[str, str]]]:
        """The event's consumer span, when spans are `recorded`; gives what gives the trace headers of the events
        it causes. Without a recorder no span is set up (a per-event cost): its trace context is handed on as
        is, worked out only if the event causes any (most projections emit nothing), once per context (`known`)."""
        if not recorded:
            return contextlib.nullcontext(_HandedOn(item.raw.headers, known))
        return self._recorded_span(item)

    @contextlib.contextmanager
    def _recorded_span(self, item: _Work) -> Iterator[Callable[[], dict[str, str]]]:
        context = propagate.extract(item.raw.headers or {})
        name = f"{self.consumer} {item.event.type}"
        with _tracer.start_as_current_span(name, context=context, kind=SpanKind.CONSUMER):
            yield self._publisher.trace_headers

    async def _save_outbox(
        self, conn: Connection, part: str, causes: Mapping[str, _Work], emitted: Mapping[str, list[Outgoing]]
    ) -> None:
        """Each event stored as the bytes that will be published (encoded once)."""
        rows = [(cause, seq, causes[cause].event.tenant_id, o.data.decode())
                for cause, outs in emitted.items() for seq, o in enumerate(outs)]  # fmt: skip
        if rows:
            await conn.execute(SAVE_OUTBOX, part, *(list(column) for column in zip(*rows, strict=True)))

    async def _load_outbox(self, conn: Connection, part: str, causes: Sequence[str]) -> dict[str, list[Event]]:
        stored: dict[str, list[Event]] = {}
        if causes:
            for row in await conn.fetch(LOAD_OUTBOX, part, list(set(causes))):
                stored.setdefault(str(row["causation_id"]), []).append(event_adapter.validate_json(row["event"]))
        return stored

    async def _apply_one(self, item: _Work) -> bool:
        """True when the event was applied or dead-lettered; False when it goes back for another delivery."""
        try:
            await self._publisher.publish_outgoing(await self._apply([item]))
        except Exception as error:
            fault = classify(error)
            if fault is Fault.TRANSIENT:
                raise
            if fault is Fault.DETERMINISTIC or item.delivery.num_delivered >= self._settings.max_deliver:
                await self.dead_letter(item.raw, describe(error))
                return True
            log.warning("retrying %s in %s: %s", item.event.event_id, self.consumer, describe(error))
            await item.raw.nak(delay=self._retry_delay(item.delivery))
            self.counts.retried_other += 1
            return False
        await item.raw.ack()
        self.counts.applied += 1
        return True

    @staticmethod
    def _retry_delay(delivery: Delivery) -> float:
        return float(min(0.2 * 2**delivery.num_delivered, 10.0))


def _uuids(ids: Iterable[str]) -> str:
    """UUIDs as the inside of an array literal. Events are validated against a UUID pattern when decoded; checked
    again here, cheaply, because the text goes into SQL: hex digits and dashes only (Postgres checks the rest)."""
    listed = ",".join(ids)
    if not _UUID_LIST.fullmatch(listed):
        raise ValueError(f"not a list of UUIDs: {listed[:200]!r}")
    return listed


def _names(names: Iterable[str]) -> str:
    """Projection names as the inside of an array literal, each quoted; only letters, digits, '_', '.' and '-'."""
    listed = list(names)
    if not all(_NAME.fullmatch(name) for name in listed):
        raise ValueError(f"not a list of projection names: {listed[:5]!r}")
    return ",".join(f'"{name}"' for name in listed)


def _literal(text: str) -> str:
    """A string as an SQL literal (standard_conforming_strings, on by default since Postgres 9.1)."""
    return "'" + text.replace("'", "''") + "'"
