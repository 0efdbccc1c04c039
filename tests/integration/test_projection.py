"""The exactly-once projection against real JetStream and Postgres: a redelivered event is applied
once, its outbox is re-published with the same event id, failing and undecodable messages end up in
the dead-letter stream with the reason, a transient failure is held and retried without spending
deliveries. Each test has its own consumer and tenant; the handler only touches its own tenant, since a
new durable consumer replays whatever earlier tests left in the stream."""

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, TypeAlias

import asyncpg
import nats.js.errors
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, RawStreamMsg
from opentelemetry import propagate
from opentelemetry.propagators.textmap import TextMapPropagator, default_getter, default_setter

from cairn.delivery.consumer import BatchHandlers, Delivery, Handler, Projection, Unit
from cairn.delivery.publisher import EventPublisher, Outgoing
from cairn.delivery.settings import NatsSettings, SupervisionSettings
from cairn.delivery.trace_context import recording
from cairn.events import (
    DEAD_LETTER_STREAM,
    INDEX_STREAM,
    RECALL_STREAM,
    Event,
    IndexAdvanced,
    RecallPerformed,
    dead_letter_subject,
    decode_event,
    encode_event,
    subject_for,
)
from cairn.local import LocalStack
from cairn.storage.postgres import tenant_transaction
from tests.integration.conftest import eventually, holds_for
from tests.streams import stream_messages

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
FAST = NatsSettings(max_deliver=2, ack_wait_s=1, fetch_batch=16)
PATIENT = NatsSettings(max_deliver=5, ack_wait_s=1, fetch_batch=16)


@pytest.fixture(scope="module")
async def table(stack: LocalStack) -> AsyncIterator[str]:
    """A table of the test's own, in a fresh schema, under row-level security like the migrations'.

    No unique key on purpose: a second application of an event would show as a second row.
    """
    schema = f"projection_test_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        await conn.execute(
            f"""
            CREATE SCHEMA {schema};
            CREATE TABLE {schema}.applied (tenant_id uuid NOT NULL, event_id uuid NOT NULL, stream_seq bigint NOT NULL,
                txid bigint NOT NULL DEFAULT txid_current());
            ALTER TABLE {schema}.applied ENABLE ROW LEVEL SECURITY;
            ALTER TABLE {schema}.applied FORCE ROW LEVEL SECURITY;
            CREATE POLICY tenant_isolation ON {schema}.applied
                USING (tenant_id = cairn.current_tenant()) WITH CHECK (tenant_id = cairn.current_tenant());
            GRANT USAGE ON SCHEMA {schema} TO cairn_app;
            GRANT SELECT, INSERT ON {schema}.applied TO cairn_app;
            SELECT cairn.admit_tenant_batches('{schema}.applied');
            """
        )
        yield f"{schema}.applied"
    finally:
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await conn.close()


class Recorder:
    """A handler for one tenant's `RecallPerformed`: inserts a row, and optionally emits or fails."""

    def __init__(self, table: str, tenant: str, emit: bool = False, fail: bool = False) -> None:
        self.table, self.tenant, self.emit, self.fail = table, tenant, emit, fail
        self.deliveries: list[Delivery] = []

    async def __call__(self, conn: Any, event: RecallPerformed, delivery: Delivery) -> Sequence[Event]:
        if event.tenant_id != self.tenant:
            return []  # an earlier test's event, replayed by this new consumer
        self.deliveries.append(delivery)
        await conn.execute(
            f"INSERT INTO {self.table} (tenant_id, event_id, stream_seq) VALUES ($1, $2, $3)",
            uuid.UUID(event.tenant_id),
            uuid.UUID(event.event_id),
            delivery.stream_seq,
        )
        if self.fail:
            raise RuntimeError(f"recorder refuses {event.event_id}")
        if not self.emit:
            return []
        return [IndexAdvanced(tenant_id=event.tenant_id, causation_id=event.event_id, ingest_seq=delivery.stream_seq)]


class RecordingPublisher(EventPublisher):
    """Remembers every non-empty batch it is asked to publish; the first `failures` of them fail, as if
    the process died between the commit and the publish."""

    def __init__(self, js: JetStreamContext, failures: int = 0) -> None:
        super().__init__(js)
        self.batches: list[list[Event]] = []
        self._failures = failures

    async def publish_outgoing(self, outgoing: Sequence[Outgoing]) -> None:
        if outgoing:
            self.batches.append([o.event for o in outgoing])
            if self._failures > 0:
                self._failures -= 1
                raise ConnectionError("lost the connection before publishing")
        await super().publish_outgoing(outgoing)


@contextlib.asynccontextmanager
async def running(
    js: JetStreamContext,
    stream: str,
    handlers: Mapping[type, Handler] | BatchHandlers,
    pool: Pool,
    settings: NatsSettings,
    publisher: EventPublisher | None = None,
    filter_subject: str | tuple[str, ...] | None = None,
    consumer: str | None = None,
) -> AsyncIterator[Projection]:
    """A projection with a fresh durable consumer (or the one named), run as a task; cancelled and its
    consumer deleted after."""
    consumer = consumer or f"test-{uuid.uuid4().hex[:12]}"
    projection = Projection(consumer, stream, handlers, pool, publisher or EventPublisher(js), settings, filter_subject)
    try:
        async with kept(projection):
            yield projection
    finally:
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await js.delete_consumer(stream, consumer)


@contextlib.asynccontextmanager
async def kept(projection: Projection) -> AsyncIterator[Projection]:
    """A projection run as a task, its durable consumer left as it stands when stopped (as a release leaves it)."""
    task = asyncio.create_task(projection.run())
    try:
        yield projection
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def settled(js: JetStreamContext, projection: Projection, seq: int) -> bool:
    """Whether the consumer has acked (or terminated) everything up to stream sequence `seq`."""
    try:
        info = await js.consumer_info(projection.stream, projection.consumer)
    except nats.js.errors.NotFoundError:
        return False  # the task has not created its consumer yet
    return info.ack_floor is not None and (info.ack_floor.stream_seq or 0) >= seq


async def rows(pool: Pool, table: str, tenant: str) -> list[asyncpg.Record]:
    async with tenant_transaction(pool, tenant) as conn:
        return list(await conn.fetch(f"SELECT event_id, stream_seq FROM {table} ORDER BY stream_seq"))


def recall(tenant: str) -> RecallPerformed:
    return RecallPerformed(tenant_id=tenant, session_key="agent:main:main", outcome="injected", items=2)


async def publish_twice(publisher: EventPublisher, event: Event) -> tuple[int, int]:
    """The same event under two message ids, so JetStream stores it twice, as after a publisher retry
    outside the dedup window."""
    first = await publisher.publish(event, msg_id=f"{event.event_id}:a")
    second = await publisher.publish(event, msg_id=f"{event.event_id}:b")
    assert not first.duplicate
    assert not second.duplicate
    return first.seq, second.seq


async def test_an_event_delivered_twice_is_applied_once(nats_client: Client, app_pool: Pool, table: str) -> None:
    js, tenant = nats_client.jetstream(), str(uuid.uuid4())
    recorder = Recorder(table, tenant)
    async with running(js, RECALL_STREAM, {RecallPerformed: recorder}, app_pool, FAST) as projection:
        event = recall(tenant)
        first, second = await publish_twice(EventPublisher(js), event)
        assert await eventually(lambda: settled(js, projection, second))
    assert [d.stream_seq for d in recorder.deliveries] == [first]
    assert [(str(r["event_id"]), r["stream_seq"]) for r in await rows(app_pool, table, tenant)] == [
        (event.event_id, first)
    ]


async def test_a_redelivery_re_publishes_the_outbox_and_writes_nothing_new(
    nats_client: Client, app_pool: Pool, table: str
) -> None:
    js, tenant = nats_client.jetstream(), str(uuid.uuid4())
    recorder, publisher = Recorder(table, tenant, emit=True), RecordingPublisher(js)
    async with running(js, RECALL_STREAM, {RecallPerformed: recorder}, app_pool, FAST, publisher) as projection:
        event = recall(tenant)
        _, second = await publish_twice(EventPublisher(js), event)
        assert await eventually(lambda: settled(js, projection, second))
    assert len(recorder.deliveries) == 1
    assert len(await rows(app_pool, table, tenant)) == 1
    # both deliveries may arrive in one fetch and be applied in one transaction: count events, not batches
    published = [e for batch in publisher.batches for e in batch]
    assert len(published) == 2, "the second delivery re-publishes the stored outbox"
    emitted, republished = published
    assert republished == emitted  # the stored event itself, same event_id, not a fresh one
    assert emitted.causation_id == event.event_id
    stored = await stream_messages(js, INDEX_STREAM, subject_for(emitted))
    assert [m.data for m in stored] == [encode_event(emitted)], "JetStream drops the re-publish by its msg id"


async def test_the_outbox_keeps_an_event_as_the_bytes_it_was_published_as(
    nats_client: Client, app_pool: Pool, table: str
) -> None:
    """Stored as text (migration 0101), not parsed into jsonb: a re-publish sends exactly what was sent first."""
    js, tenant = nats_client.jetstream(), str(uuid.uuid4())
    recorder = Recorder(table, tenant, emit=True)
    async with running(js, RECALL_STREAM, {RecallPerformed: recorder}, app_pool, FAST) as projection:
        event = recall(tenant)
        seq = (await EventPublisher(js).publish(event)).seq
        assert await eventually(lambda: settled(js, projection, seq))
    async with tenant_transaction(app_pool, tenant) as conn:
        kept = await conn.fetchval(
            "SELECT event FROM cairn.outbox WHERE consumer = $1 AND causation_id = $2",
            projection.consumer, uuid.UUID(event.event_id),
        )  # fmt: skip
    emitted = IndexAdvanced(tenant_id=tenant, causation_id=event.event_id, ingest_seq=seq)
    published = await stream_messages(js, INDEX_STREAM, subject_for(emitted))
    mine = [m.data for m in published if m.data and decode_event(m.data).causation_id == event.event_id]
    assert [kept.encode()] == mine


async def test_a_crash_between_commit_and_publish_is_repaired_by_the_outbox(
    nats_client: Client, app_pool: Pool, table: str
) -> None:
    js, tenant = nats_client.jetstream(), str(uuid.uuid4())
    recorder, publisher = Recorder(table, tenant, emit=True), RecordingPublisher(js, failures=1)
    async with running(js, RECALL_STREAM, {RecallPerformed: recorder}, app_pool, PATIENT, publisher) as projection:
        event = recall(tenant)
        seq = (await EventPublisher(js).publish(event)).seq
        assert await eventually(lambda: settled(js, projection, seq))
    assert len(recorder.deliveries) == 1, "the rows were committed by the first delivery"
    assert len(await rows(app_pool, table, tenant)) == 1
    assert len(publisher.batches) == 2
    (lost,), (published,) = publisher.batches
    assert published.event_id == lost.event_id
    stored = await stream_messages(js, INDEX_STREAM, subject_for(published))
    assert [m.data for m in stored] == [encode_event(published)]


async def test_a_handler_that_keeps_failing_is_dead_lettered_after_max_deliver(
    nats_client: Client, app_pool: Pool, table: str
) -> None:
    js, tenant = nats_client.jetstream(), str(uuid.uuid4())
    recorder = Recorder(table, tenant, fail=True)
    async with running(js, RECALL_STREAM, {RecallPerformed: recorder}, app_pool, FAST) as projection:
        event = recall(tenant)
        seq = (await EventPublisher(js).publish(event)).seq
        subject = dead_letter_subject(projection.consumer, "*")

        async def its_letters() -> list[RawStreamMsg]:
            # a fresh consumer reads the whole stream: other tests' garbage there is dead-lettered under it too
            return [m for m in await stream_messages(js, DEAD_LETTER_STREAM, subject) if m.data == encode_event(event)]

        letters = await eventually(its_letters)
        assert await eventually(lambda: settled(js, projection, seq))

        async def nothing_more() -> bool:
            return len(recorder.deliveries) == 2 and len(await its_letters()) == 1

        # Longer than ack_wait plus the retry backoff: a message still owed would have come back by now.
        assert await holds_for(nothing_more, FAST.ack_wait_s + 1.0)
    assert [d.num_delivered for d in recorder.deliveries] == [1, 2]
    assert await rows(app_pool, table, tenant) == [], "every failed attempt was rolled back"
    (letter,) = letters
    assert letter.data == encode_event(event)
    headers = letter.headers or {}
    assert headers["Cairn-Error"] == f"RuntimeError: recorder refuses {event.event_id}"
    assert headers["Cairn-Stream"] == RECALL_STREAM
    assert headers["Cairn-Stream-Seq"] == str(seq)
    assert headers["Cairn-Subject"] == subject_for(event)
    assert headers["Cairn-Deliveries"] == "2"


# A transient failure lasting longer than the whole delivery budget (max_deliver × ack_wait): the pull loop holds the
# batch in progress and retries it in-process, so JetStream never redelivers it and nothing is dead-lettered.
HELD = NatsSettings(max_deliver=2, ack_wait_s=1, fetch_batch=16, retry_first_s=0.05, retry_cap_s=0.3)
FAILING_S = 4 * HELD.ack_wait_s * HELD.max_deliver


class UnreachableAtFirst:
    """Stores its tenant's events; for the first `failing_s` seconds after its first call every attempt fails
    as a dropped connection does."""

    def __init__(self, table: str, tenant: str, failing_s: float) -> None:
        self.table, self.tenant, self.failing_s = table, tenant, failing_s
        self.since: float | None = None
        self.attempts, self.deliveries = 0, list[int]()

    async def __call__(self, conn: Any, event: RecallPerformed, delivery: Delivery) -> Sequence[Event]:
        if event.tenant_id != self.tenant:
            return []
        self.since = self.since or time.monotonic()
        self.attempts += 1
        self.deliveries.append(delivery.num_delivered)
        if time.monotonic() - self.since < self.failing_s:
            raise ConnectionResetError(104, "Connection reset by peer")
        await conn.execute(
            f"INSERT INTO {self.table} (tenant_id, event_id, stream_seq) VALUES ($1, $2, $3)",
            uuid.UUID(event.tenant_id), uuid.UUID(event.event_id), delivery.stream_seq,
        )  # fmt: skip
        return []


async def test_a_transient_failure_longer_than_the_budget_is_held_not_redelivered_nor_dead_lettered(
    nats_client: Client, app_pool: Pool, table: str
) -> None:
    js, tenant, agent = nats_client.jetstream(), str(uuid.uuid4()), f"a{uuid.uuid4().hex[:8]}"
    handler = UnreachableAtFirst(table, tenant, FAILING_S)
    events = [RecallPerformed(tenant_id=tenant, agent_id=agent, session_key=f"agent:{agent}:main", outcome="none")
              for _ in range(2)]  # fmt: skip
    filter_subject = f"cairn.*.{agent}.recall.performed"
    supervision = SupervisionSettings(stalled_after_s=0.5)
    publisher = EventPublisher(js)
    async with running(js, RECALL_STREAM, {RecallPerformed: handler}, app_pool, HELD,
                       filter_subject=filter_subject) as projection:  # fmt: skip
        seqs = [(await publisher.publish(event)).seq for event in events]

        async def reported() -> str | None:
            return projection.health.problem(supervision)

        problem = await eventually(reported)
        assert problem is not None
        assert problem.startswith("retrying for")
        assert "ConnectionResetError" in problem
        assert await eventually(lambda: settled(js, projection, seqs[-1]), within=FAILING_S + 15)
        assert projection.health.problem(supervision) is None, "recovered"
        letters = await stream_messages(js, DEAD_LETTER_STREAM, dead_letter_subject(projection.consumer, "*"))
    assert letters == []
    assert handler.attempts > 2 * HELD.max_deliver, "retried for as long as it failed, past the budget"
    assert set(handler.deliveries) == {1}, "held in progress: JetStream never delivered it again"
    applied = await rows(app_pool, table, tenant)
    assert [str(r["event_id"]) for r in applied] == [e.event_id for e in events], "once each, in order"


async def test_undecodable_bytes_are_dead_lettered_at_once(nats_client: Client, app_pool: Pool) -> None:
    js, tenant = nats_client.jetstream(), str(uuid.uuid4())
    garbage = b"\xff not an event " + tenant.encode()
    subject = f"cairn.{tenant}.main.index.advanced"
    async with running(js, INDEX_STREAM, {}, app_pool, FAST) as projection:
        ack = await js.publish(subject, garbage, stream=INDEX_STREAM)
        dead = dead_letter_subject(projection.consumer, "*")
        letters = await eventually(lambda: stream_messages(js, DEAD_LETTER_STREAM, dead))
        assert await eventually(lambda: settled(js, projection, ack.seq))
    mine = [m for m in letters if m.data == garbage]
    assert len(mine) == 1
    headers = mine[0].headers or {}
    assert headers["Cairn-Error"].startswith("undecodable event:")
    assert headers["Cairn-Deliveries"] == "1", "not retried: no attempt could ever decode it"
    assert headers["Cairn-Stream-Seq"] == str(ack.seq)
    assert headers["Cairn-Subject"] == subject


# The set-based path: handlers that buffer rows per event and write them all at the end of the transaction.
BATCHED = NatsSettings(max_deliver=2, ack_wait_s=1, fetch_batch=64)


class BatchRecorder:
    """Like the services' projections: each event's row is buffered, `complete` writes them with one INSERT
    and fails when a poison event is among them (one bad row fails the whole statement)."""

    def __init__(
        self, table: str, tenants: set[str], poison: frozenset[str] = frozenset(), emit: bool = False,
        across_tenants: bool = False,
    ) -> None:  # fmt: skip
        self.table, self.tenants, self.poison, self.emit = table, tenants, poison, emit
        self.across_tenants = across_tenants
        self.deliveries: list[tuple[str, int]] = []  # (event id, delivery number), as handled

    def handles(self, event: Event) -> bool:
        return isinstance(event, RecallPerformed) and event.tenant_id in self.tenants

    def begin(self, conn: Any, events: Sequence[Event]) -> Unit:
        return _RecorderUnit(self, conn)


class _RecorderUnit:
    def __init__(self, recorder: BatchRecorder, conn: Any) -> None:
        self.recorder, self.conn = recorder, conn
        self.rows: list[tuple[uuid.UUID, uuid.UUID, int]] = []

    async def handle(self, event: Event, delivery: Delivery) -> Sequence[Event]:
        self.recorder.deliveries.append((event.event_id, delivery.num_delivered))
        self.rows.append((uuid.UUID(event.tenant_id), uuid.UUID(event.event_id), delivery.stream_seq))
        if not self.recorder.emit:
            return []
        return [IndexAdvanced(tenant_id=event.tenant_id, causation_id=event.event_id, ingest_seq=delivery.stream_seq)]

    async def complete(self) -> None:
        if bad := [str(r[1]) for r in self.rows if str(r[1]) in self.recorder.poison]:
            raise RuntimeError(f"poison {bad[0]}")
        tenants, events, seqs = (list(c) for c in zip(*self.rows, strict=True))
        await self.conn.execute(
            f"INSERT INTO {self.recorder.table} (tenant_id, event_id, stream_seq) "
            "SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::bigint[])",
            tenants, events, seqs,
        )  # fmt: skip


def recall_of(tenant: str, agent: str) -> RecallPerformed:
    return RecallPerformed(tenant_id=tenant, agent_id=agent, session_key=f"agent:{agent}:main", outcome="none")


async def applied(pool: Pool, table: str, tenant: str) -> list[tuple[str, int]]:
    async with tenant_transaction(pool, tenant) as conn:
        found = await conn.fetch(f"SELECT event_id, txid FROM {table} ORDER BY stream_seq")
    return [(str(r["event_id"]), r["txid"]) for r in found]


@pytest.mark.parametrize("across_tenants", [False, True], ids=["per-tenant handlers", "cross-tenant handlers"])
async def test_a_batch_is_applied_per_tenant_in_one_transaction_each_in_stream_order(
    nats_client: Client, app_pool: Pool, table: str, across_tenants: bool
) -> None:
    """Two tenants interleaved in one fetch: each tenant's events in one transaction, in stream order. On a
    cairn_app pool even handlers that could take several tenants get one transaction per tenant."""
    js, a, b, agent = nats_client.jetstream(), str(uuid.uuid4()), str(uuid.uuid4()), f"a{uuid.uuid4().hex[:8]}"
    events = [recall_of(tenant, agent) for tenant in (a, b, a, b, a)]
    publisher = EventPublisher(js)
    seqs = [(await publisher.publish(event)).seq for event in events]  # all stored before the first fetch
    recorder = BatchRecorder(table, {a, b}, across_tenants=across_tenants)
    filter_subject = f"cairn.*.{agent}.recall.performed"  # only this test's events, so one fetch holds them all
    async with running(js, RECALL_STREAM, recorder, app_pool, BATCHED, filter_subject=filter_subject) as projection:
        assert await eventually(lambda: settled(js, projection, seqs[-1]))
    rows_a, rows_b = await applied(app_pool, table, a), await applied(app_pool, table, b)
    assert [e for e, _ in rows_a] == [events[0].event_id, events[2].event_id, events[4].event_id]
    assert [e for e, _ in rows_b] == [events[1].event_id, events[3].event_id]
    assert len({t for _, t in rows_a}) == 1, "one transaction for tenant a's three events"
    assert len({t for _, t in rows_b}) == 1
    assert rows_a[0][1] != rows_b[0][1], "tenants never share a transaction (row-level security)"


async def test_a_poison_event_in_a_batch_is_dead_lettered_and_nothing_else_is_lost(
    nats_client: Client, app_pool: Pool, table: str
) -> None:
    js, a, b, agent = nats_client.jetstream(), str(uuid.uuid4()), str(uuid.uuid4()), f"a{uuid.uuid4().hex[:8]}"
    events = [recall_of(a, agent), recall_of(a, agent), recall_of(b, agent), recall_of(a, agent)]
    poison = events[1]
    publisher = EventPublisher(js)
    seqs = [(await publisher.publish(event)).seq for event in events]
    recorder = BatchRecorder(table, {a, b}, poison=frozenset({poison.event_id}))
    filter_subject = f"cairn.*.{agent}.recall.performed"
    async with running(js, RECALL_STREAM, recorder, app_pool, BATCHED, filter_subject=filter_subject) as projection:
        dead = dead_letter_subject(projection.consumer, "*")
        letters = await eventually(lambda: stream_messages(js, DEAD_LETTER_STREAM, dead))
        assert await eventually(lambda: settled(js, projection, seqs[-1]))
    assert [e for e, _ in await applied(app_pool, table, a)] == [events[0].event_id, events[3].event_id]
    assert [e for e, _ in await applied(app_pool, table, b)] == [events[2].event_id]
    (letter,) = letters
    assert letter.data == encode_event(poison)
    assert (letter.headers or {})["Cairn-Error"] == f"RuntimeError: poison {poison.event_id}"
    after = [n for e, n in recorder.deliveries if e == events[3].event_id]
    before = [n for e, n in recorder.deliveries if e == poison.event_id]
    assert max(after) >= max(before), "the event after the poison was not applied before it was settled"


async def test_a_duplicate_inside_a_batch_is_applied_once_and_re_publishes_its_outbox(
    nats_client: Client, app_pool: Pool, table: str
) -> None:
    js, tenant, agent = nats_client.jetstream(), str(uuid.uuid4()), f"a{uuid.uuid4().hex[:8]}"
    event, other = recall_of(tenant, agent), recall_of(tenant, agent)
    publisher = EventPublisher(js)
    first, second = await publish_twice(publisher, event)
    last = (await publisher.publish(other)).seq
    recorder, recording = BatchRecorder(table, {tenant}, emit=True), RecordingPublisher(js)
    filter_subject = f"cairn.*.{agent}.recall.performed"
    async with running(
        js, RECALL_STREAM, recorder, app_pool, BATCHED, recording, filter_subject=filter_subject
    ) as projection:
        assert await eventually(lambda: settled(js, projection, last))
    assert [e for e, _ in recorder.deliveries] == [event.event_id, other.event_id], "the duplicate is not handled"
    rows_ = await applied(app_pool, table, tenant)
    assert [e for e, _ in rows_] == [event.event_id, other.event_id]
    assert len({t for _, t in rows_}) == 1, "one fetch, one transaction"
    (batch,) = recording.batches
    assert [e.causation_id for e in batch] == [event.event_id, event.event_id, other.event_id]
    assert batch[0] == batch[1], "the duplicate re-publishes the same event, which JetStream then drops"
    assert second > first


async def test_a_batch_of_new_events_and_one_processed_before_applies_only_the_new_ones(
    nats_client: Client, app_pool: Pool, table: str
) -> None:
    """As after an ack lost at a commit: the batch's opening statement records only some of its events, so which
    ones are new is looked up; the one processed before only re-publishes what it emitted then."""
    js, tenant, agent = nats_client.jetstream(), str(uuid.uuid4()), f"a{uuid.uuid4().hex[:8]}"
    before, done, after = recall_of(tenant, agent), recall_of(tenant, agent), recall_of(tenant, agent)
    consumer = f"test-{uuid.uuid4().hex[:12]}"
    emitted_then = IndexAdvanced(tenant_id=tenant, causation_id=done.event_id, ingest_seq=1)
    async with tenant_transaction(app_pool, tenant) as conn:
        await conn.execute(
            "INSERT INTO cairn.processed_events (consumer, event_id, tenant_id) VALUES ($1, $2, $3)",
            consumer, uuid.UUID(done.event_id), uuid.UUID(tenant),
        )  # fmt: skip
        await conn.execute(
            "INSERT INTO cairn.outbox (consumer, causation_id, seq, tenant_id, event) VALUES ($1, $2, 0, $3, $4)",
            consumer, uuid.UUID(done.event_id), uuid.UUID(tenant), encode_event(emitted_then).decode(),
        )  # fmt: skip
    publisher = EventPublisher(js)
    for event in (before, done):
        await publisher.publish(event)
    last = (await publisher.publish(after)).seq
    recorder, recording = BatchRecorder(table, {tenant}, emit=True), RecordingPublisher(js)
    filter_subject = f"cairn.*.{agent}.recall.performed"
    async with running(
        js, RECALL_STREAM, recorder, app_pool, BATCHED, recording, filter_subject=filter_subject, consumer=consumer
    ) as projection:
        assert await eventually(lambda: settled(js, projection, last))
    assert [e for e, _ in recorder.deliveries] == [before.event_id, after.event_id]
    rows_ = await applied(app_pool, table, tenant)
    assert [e for e, _ in rows_] == [before.event_id, after.event_id]
    assert len({t for _, t in rows_}) == 1, "one fetch, one transaction"
    (batch,) = recording.batches
    assert [e.causation_id for e in batch] == [before.event_id, done.event_id, after.event_id]
    assert batch[1] == emitted_then, "the event processed before re-publishes what it emitted then"


async def test_a_projection_filtered_to_several_subjects_reads_only_those(
    nats_client: Client, app_pool: Pool, table: str
) -> None:
    js, tenant = nats_client.jetstream(), str(uuid.uuid4())
    wanted, other, unwanted = (f"a{uuid.uuid4().hex[:8]}" for _ in range(3))
    events = [recall_of(tenant, agent) for agent in (wanted, unwanted, other, unwanted, wanted)]
    publisher = EventPublisher(js)
    seqs = [(await publisher.publish(event)).seq for event in events]
    recorder = BatchRecorder(table, {tenant})
    subjects = (f"cairn.*.{wanted}.recall.performed", f"cairn.*.{other}.recall.performed")
    async with running(js, RECALL_STREAM, recorder, app_pool, BATCHED, filter_subject=subjects) as projection:
        assert await eventually(lambda: settled(js, projection, seqs[-1]))
        info = await js.consumer_info(RECALL_STREAM, projection.consumer)
    assert [e for e, _ in recorder.deliveries] == [events[0].event_id, events[2].event_id, events[4].event_id]
    assert sorted(info.config.filter_subjects or []) == sorted(subjects)


async def test_a_consumer_left_by_an_older_release_is_brought_to_the_filter_this_code_reads(
    nats_client: Client, app_pool: Pool, table: str
) -> None:
    js, tenant = nats_client.jetstream(), str(uuid.uuid4())
    old, added = (f"a{uuid.uuid4().hex[:8]}" for _ in range(2))
    consumer = f"test-{uuid.uuid4().hex[:12]}"
    old_subject, added_subject = (f"cairn.*.{agent}.recall.performed" for agent in (old, added))
    # what an older release created: the same durable name, reading one agent's events only
    await js.add_consumer(
        RECALL_STREAM, ConsumerConfig(name=consumer, durable_name=consumer, filter_subject=old_subject, max_deliver=-1)
    )
    recorder = BatchRecorder(table, {tenant})
    subjects = (old_subject, added_subject)
    async with running(
        js, RECALL_STREAM, recorder, app_pool, BATCHED, filter_subject=subjects, consumer=consumer
    ) as projection:
        events = [recall_of(tenant, agent) for agent in (old, added)]
        publisher = EventPublisher(js)
        seqs = [(await publisher.publish(event)).seq for event in events]
        assert await eventually(lambda: settled(js, projection, seqs[-1]))
        info = await js.consumer_info(RECALL_STREAM, consumer)
    assert [e for e, _ in recorder.deliveries] == [e.event_id for e in events], "the added subject is delivered"
    assert sorted(info.config.filter_subjects or []) == sorted(subjects)


async def test_on_the_projector_role_a_batch_of_several_tenants_is_one_transaction(
    nats_client: Client, projector_pool: Pool, app_pool: Pool, table: str
) -> None:
    js, a, b, agent = nats_client.jetstream(), str(uuid.uuid4()), str(uuid.uuid4()), f"a{uuid.uuid4().hex[:8]}"
    events = [recall_of(tenant, agent) for tenant in (a, b, a, b, a)]
    publisher = EventPublisher(js)
    seqs = [(await publisher.publish(event)).seq for event in events]
    recorder, recording = BatchRecorder(table, {a, b}, emit=True, across_tenants=True), RecordingPublisher(js)
    filter_subject = f"cairn.*.{agent}.recall.performed"
    async with running(
        js, RECALL_STREAM, recorder, projector_pool, BATCHED, recording, filter_subject=filter_subject
    ) as projection:
        assert await eventually(lambda: settled(js, projection, seqs[-1]))
    rows_a, rows_b = await applied(app_pool, table, a), await applied(app_pool, table, b)
    assert [e for e, _ in rows_a] == [events[0].event_id, events[2].event_id, events[4].event_id]
    assert [e for e, _ in rows_b] == [events[1].event_id, events[3].event_id]
    assert len({t for _, t in rows_a + rows_b}) == 1, "one transaction for both tenants' events"
    (batch,) = recording.batches
    assert [e.causation_id for e in batch] == [e.event_id for e in events], "published in stream order"
    assert [e.tenant_id for e in batch] == [e.tenant_id for e in events]
    async with tenant_transaction(app_pool, b) as conn:  # each processed record and outbox row is its tenant's
        assert await conn.fetchval(
            "SELECT count(*) FROM cairn.outbox WHERE consumer = $1", projection.consumer
        ) == 2  # fmt: skip
        assert await conn.fetchval(
            "SELECT count(*) FROM cairn.processed_events WHERE consumer = $1", projection.consumer
        ) == 2  # fmt: skip


async def test_a_poison_event_in_a_batch_of_several_tenants_is_dead_lettered_and_nothing_else_is_lost(
    nats_client: Client, projector_pool: Pool, app_pool: Pool, table: str
) -> None:
    js, a, b, agent = nats_client.jetstream(), str(uuid.uuid4()), str(uuid.uuid4()), f"a{uuid.uuid4().hex[:8]}"
    events = [recall_of(a, agent), recall_of(b, agent), recall_of(a, agent), recall_of(b, agent), recall_of(a, agent)]
    poison = events[2]
    publisher = EventPublisher(js)
    seqs = [(await publisher.publish(event)).seq for event in events]
    recorder = BatchRecorder(table, {a, b}, poison=frozenset({poison.event_id}), across_tenants=True)
    filter_subject = f"cairn.*.{agent}.recall.performed"
    async with running(
        js, RECALL_STREAM, recorder, projector_pool, BATCHED, filter_subject=filter_subject
    ) as projection:
        dead = dead_letter_subject(projection.consumer, "*")
        letters = await eventually(lambda: stream_messages(js, DEAD_LETTER_STREAM, dead))
        assert await eventually(lambda: settled(js, projection, seqs[-1]))
    assert [e for e, _ in await applied(app_pool, table, a)] == [events[0].event_id, events[4].event_id]
    rows_b = await applied(app_pool, table, b)
    assert [e for e, _ in rows_b] == [events[1].event_id, events[3].event_id]
    assert len({t for _, t in rows_b}) == 1, "the healthy tenant's events still went in together"
    (letter,) = letters
    assert letter.data == encode_event(poison)
    assert (letter.headers or {})["Cairn-Error"] == f"RuntimeError: poison {poison.event_id}"
    after = [n for e, n in recorder.deliveries if e == events[4].event_id]
    before = [n for e, n in recorder.deliveries if e == poison.event_id]
    assert max(after) >= max(before), "the event after the poison was not applied before it was settled"


async def test_without_a_span_recorder_emitted_events_carry_their_cause_s_trace_context(
    nats_client: Client, app_pool: Pool, table: str
) -> None:
    """No exporter in this process, so no span is set up per event; the trace context still travels on: an
    event caused by a traced message carries its traceparent, tracestate and baggage, an untraced one none."""
    assert not recording(), "this test runs without an SDK tracer provider"
    js, tenant = nats_client.jetstream(), str(uuid.uuid4())
    traced, untraced = recall(tenant), recall(tenant)
    parent = f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"
    context = {"traceparent": parent, "tracestate": "vendor=abc", "baggage": "tenant=t1"}
    events = traced, untraced
    for event, headers in zip(events, (context, {}), strict=True):
        await js.publish(subject_for(event), encode_event(event), stream=RECALL_STREAM,
                         headers={**headers, "Nats-Msg-Id": event.event_id})  # fmt: skip
    last = (await js.stream_info(RECALL_STREAM)).state.last_seq
    async with running(js, RECALL_STREAM, {RecallPerformed: Recorder(table, tenant, emit=True)}, app_pool, FAST) as p:
        assert await eventually(lambda: settled(js, p, last))
    subject = subject_for(IndexAdvanced(tenant_id=tenant, ingest_seq=1))
    emitted = {decode_event(m.data or b"").causation_id: m.headers or {} for m in await stream_messages(
        js, INDEX_STREAM, subject)}  # fmt: skip
    assert set(emitted) == {traced.event_id, untraced.event_id}
    trace_headers = [{k: v for k, v in emitted[e.event_id].items() if not k.startswith("Nats-")} for e in events]
    assert trace_headers == [context, {}]


async def test_a_consumer_stopped_while_it_waits_out_unacked_messages_leaves_no_subscription(
    nats_client: Client, app_pool: Pool, table: str
) -> None:
    """A replica that takes over a partition first waits `ack_wait` for what the old holder fetched but
    never acked. Stopped during that wait (a rolling deploy), it must unsubscribe: a subscription left on
    the connection is drained at shutdown, and a drain that waits on it outlives the process's stop."""
    js, tenant, consumer = nats_client.jetstream(), str(uuid.uuid4()), f"test-{uuid.uuid4().hex[:12]}"
    await js.add_consumer(RECALL_STREAM, ConsumerConfig(durable_name=consumer, ack_wait=30, max_deliver=-1))
    await EventPublisher(js).publish(recall(tenant))
    crashed_holder = await js.pull_subscribe_bind(durable=consumer, stream=RECALL_STREAM)
    assert len(await crashed_holder.fetch(1, timeout=5)) == 1  # fetched, never acked
    await crashed_holder.unsubscribe()
    subscriptions = len(nats_client._subs)  # nats-py keeps no public list of a connection's subscriptions

    settings = NatsSettings(max_deliver=2, ack_wait_s=30, fetch_batch=16)
    projection = Projection(consumer, RECALL_STREAM, {RecallPerformed: Recorder(table, tenant)}, app_pool,
                            EventPublisher(js), settings)  # fmt: skip
    task = asyncio.create_task(projection.run())
    try:
        assert await eventually(lambda: _subscribed(nats_client, subscriptions + 1)), "it waits, subscribed"
        assert not task.done()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert len(nats_client._subs) == subscriptions
    finally:
        task.cancel()
        await js.delete_consumer(RECALL_STREAM, consumer)


async def _subscribed(client: Client, count: int) -> bool:
    return len(client._subs) == count


class CountingPropagator(TextMapPropagator):
    """The configured propagator, counting how often a message's trace context is read."""

    def __init__(self, inner: TextMapPropagator) -> None:
        self.inner, self.extracted = inner, 0

    def extract(self, carrier: Any, context: Any = None, getter: Any = default_getter) -> Any:
        self.extracted += 1
        return self.inner.extract(carrier, context, getter)

    def inject(self, carrier: Any, context: Any = None, setter: Any = default_setter) -> None:
        self.inner.inject(carrier, context, setter)

    @property
    def fields(self) -> set[str]:
        return self.inner.fields


@contextlib.contextmanager
def counting_propagator() -> Iterator[CountingPropagator]:
    """The configured propagator wrapped in a count for the duration; put back after."""
    configured = propagate.get_global_textmap()
    counting = CountingPropagator(configured)
    propagate.set_global_textmap(counting)
    try:
        yield counting
    finally:
        propagate.set_global_textmap(configured)


@pytest.mark.parametrize("emit", [False, True])
async def test_without_a_span_recorder_an_event_that_causes_nothing_leaves_its_trace_context_unread(
    nats_client: Client, app_pool: Pool, table: str, emit: bool
) -> None:
    """Most projections emit nothing for most events: working out the trace context to hand on is then a
    cost per event for nothing. It is read only for an event that causes another (the control)."""
    js, tenant = nats_client.jetstream(), str(uuid.uuid4())
    event = recall(tenant)
    parent = f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"
    await js.publish(subject_for(event), encode_event(event), stream=RECALL_STREAM,
                     headers={"traceparent": parent, "Nats-Msg-Id": event.event_id})  # fmt: skip
    last = (await js.stream_info(RECALL_STREAM)).state.last_seq
    with counting_propagator() as counting:
        recorder = Recorder(table, tenant, emit=emit)
        async with running(js, RECALL_STREAM, {RecallPerformed: recorder}, app_pool, FAST) as projection:
            assert await eventually(lambda: settled(js, projection, last))
    assert [e for e, _ in await rows(app_pool, table, tenant)] == [uuid.UUID(event.event_id)]
    assert (counting.extracted > 0) is emit


async def test_without_a_span_recorder_a_batch_reads_each_distinct_trace_context_once(
    nats_client: Client, app_pool: Pool, table: str
) -> None:
    """The events of one ingest request share their trace context: a batch works out what to hand on once per
    context, and every emitted event still carries its own cause's (the untraced ones none)."""
    js, tenant = nats_client.jetstream(), str(uuid.uuid4())
    contexts = [{"traceparent": f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01", "baggage": f"n={n}"}
                for n in range(2)]  # fmt: skip
    sent = [(recall(tenant), contexts[i % 3] if i % 3 < 2 else {}) for i in range(9)]
    for event, headers in sent:
        await js.publish(subject_for(event), encode_event(event), stream=RECALL_STREAM,
                         headers={**headers, "Nats-Msg-Id": event.event_id})  # fmt: skip
    last = (await js.stream_info(RECALL_STREAM)).state.last_seq
    with counting_propagator() as counting:
        recorder = Recorder(table, tenant, emit=True)
        async with running(js, RECALL_STREAM, {RecallPerformed: recorder}, app_pool, FAST) as projection:
            assert await eventually(lambda: settled(js, projection, last))
    subject = subject_for(IndexAdvanced(tenant_id=tenant, ingest_seq=1))
    emitted = {decode_event(m.data or b"").causation_id: m.headers or {} for m in await stream_messages(
        js, INDEX_STREAM, subject)}  # fmt: skip
    carried = {cause: {k: v for k, v in headers.items() if not k.startswith("Nats-")}
               for cause, headers in emitted.items()}  # fmt: skip
    assert carried == {event.event_id: headers for event, headers in sent}
    # once per context and batch, not once per event: the 9 events (3 contexts) come in at most two fetches of
    # FAST's 16 (the new consumer replays earlier tests' events first), so 3 to 6 reads instead of 9
    assert 3 <= counting.extracted <= 6


async def test_a_batch_larger_than_its_byte_bound_is_applied_in_slices_in_stream_order(
    nats_client: Client, projector_pool: Pool, app_pool: Pool, table: str
) -> None:
    """A fetched batch of more bytes than `batch_bytes` becomes several transactions, one after another in
    stream order, each of whole events, instead of one transaction holding all of it."""
    js, a, b, agent = nats_client.jetstream(), str(uuid.uuid4()), str(uuid.uuid4()), f"a{uuid.uuid4().hex[:8]}"
    events = [recall_of(tenant, agent) for tenant in (a, b) * 6]
    publisher = EventPublisher(js)
    seqs = [(await publisher.publish(event)).seq for event in events]
    size = len(encode_event(events[0]))
    bounded = NatsSettings(max_deliver=2, ack_wait_s=1, fetch_batch=64, batch_bytes=max(1024, 3 * size))
    recorder = BatchRecorder(table, {a, b}, across_tenants=True)
    filter_subject = f"cairn.*.{agent}.recall.performed"
    async with running(
        js, RECALL_STREAM, recorder, projector_pool, bounded, filter_subject=filter_subject
    ) as projection:
        assert await eventually(lambda: settled(js, projection, seqs[-1]))
    rows = sorted(await applied(app_pool, table, a) + await applied(app_pool, table, b),
                  key=lambda row: [e.event_id for e in events].index(row[0]))  # fmt: skip
    assert [e for e, _ in rows] == [e.event_id for e in events], "every event applied once"
    transactions = [t for _, t in rows]
    assert transactions == sorted(transactions), "slices commit one after another, in stream order"
    per_slice = max(1, bounded.batch_bytes // size)
    assert len(set(transactions)) >= len(events) // per_slice, "no transaction holds more than its bound"
    assert all(transactions.count(t) <= per_slice for t in set(transactions))
