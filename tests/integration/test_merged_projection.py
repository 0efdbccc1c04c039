"""One consumer feeding several projections (`Projection.merged`, the indexer's session stream since its two
consumers were merged) against real JetStream and Postgres: taking over from the projections' old durable
consumers at different positions, every event is applied once per projection (none lost, none twice); after the
hand-over a redelivered batch applies nothing again; undecodable and failing events are dead-lettered."""

import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import TypeAlias

import asyncpg
import nats.js.errors
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy

from cairn.delivery.consumer import Part, Projection
from cairn.delivery.publisher import EventPublisher
from cairn.delivery.settings import NatsSettings
from cairn.events import DEAD_LETTER_STREAM, RECALL_STREAM, dead_letter_subject
from cairn.local import LocalStack
from cairn.storage.postgres import tenant_transaction
from tests.integration.conftest import eventually
from tests.integration.test_projection import BATCHED, BatchRecorder, kept, recall_of, settled
from tests.streams import stream_messages

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
PARTS = ("search", "memory")


@pytest.fixture
async def tables(stack: LocalStack) -> AsyncIterator[dict[str, str]]:
    """One table per projection, in a fresh schema, under row-level security like the migrations'. No unique key:
    an event applied twice by a projection shows as a second row."""
    schema = f"merged_test_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        await conn.execute(f"CREATE SCHEMA {schema}; GRANT USAGE ON SCHEMA {schema} TO cairn_app, cairn_projector;")
        for part in PARTS:
            await conn.execute(
                f"""
                CREATE TABLE {schema}.{part} (tenant_id uuid NOT NULL, event_id uuid NOT NULL,
                    stream_seq bigint NOT NULL, txid bigint NOT NULL DEFAULT txid_current());
                ALTER TABLE {schema}.{part} ENABLE ROW LEVEL SECURITY;
                ALTER TABLE {schema}.{part} FORCE ROW LEVEL SECURITY;
                CREATE POLICY tenant_isolation ON {schema}.{part}
                    USING (tenant_id = cairn.current_tenant()) WITH CHECK (tenant_id = cairn.current_tenant());
                GRANT SELECT, INSERT ON {schema}.{part} TO cairn_app;
                SELECT cairn.admit_tenant_batches('{schema}.{part}');
                """
            )
        yield {part: f"{schema}.{part}" for part in PARTS}
    finally:
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await conn.close()


async def rows(pool: Pool, table: str, tenant: str) -> list[tuple[str, int]]:
    """(event id, transaction id) of each applied row, in stream order."""
    async with tenant_transaction(pool, tenant) as conn:
        found = await conn.fetch(f"SELECT event_id, txid FROM {table} ORDER BY stream_seq, event_id")
    return [(str(r["event_id"]), r["txid"]) for r in found]


def merged(
    js: JetStreamContext, consumer: str, parts: Sequence[Part], pool: Pool, replaces: Sequence[str] = (),
    settings: NatsSettings = BATCHED,
) -> contextlib.AbstractAsyncContextManager[Projection]:  # fmt: skip
    return kept(Projection.merged(consumer, RECALL_STREAM, parts, pool, EventPublisher(js), settings, replaces))


async def exists(js: JetStreamContext, consumer: str) -> bool:
    try:
        await js.consumer_info(RECALL_STREAM, consumer)
    except nats.js.errors.NotFoundError:
        return False
    return True


@pytest.mark.parametrize("across", [False, True], ids=["per tenant", "across tenants"])
async def test_taking_over_from_two_consumers_at_different_positions_applies_every_event_once_per_projection(
    nats_client: Client, tables: dict[str, str], across: bool, app_pool: Pool, projector_pool: Pool
) -> None:
    pool = projector_pool if across else app_pool
    js, tenants = nats_client.jetstream(), [str(uuid.uuid4()), str(uuid.uuid4())]
    publisher, agent = EventPublisher(js), f"a{uuid.uuid4().hex[:8]}"
    names = {part: f"old-{part}-{uuid.uuid4().hex[:8]}" for part in PARTS}

    def recorder(part: str) -> BatchRecorder:
        return BatchRecorder(tables[part], set(tenants), across_tenants=across)

    async def publish(count: int) -> list[tuple[str, str, int]]:
        events = [recall_of(tenants[n % 2], agent) for n in range(count)]
        return [(e.tenant_id, e.event_id, (await publisher.publish(e)).seq) for e in events]

    def old(part: str) -> Projection:  # the release before: each projection with its own durable consumer
        return Projection(names[part], RECALL_STREAM, recorder(part), pool, publisher, BATCHED)

    early = await publish(4)
    async with kept(old("search")) as search, kept(old("memory")) as memory:
        for one in (search, memory):
            assert await eventually(lambda o=one: settled(js, o, early[-1][2]))  # type: ignore[misc]
    later = await publish(6)  # memory has stopped: only search applies these
    async with kept(old("search")) as search:
        assert await eventually(lambda: settled(js, search, later[-1][2]))
    floors = {}
    for part in PARTS:
        floor = (await js.consumer_info(RECALL_STREAM, names[part])).ack_floor
        floors[part] = floor.stream_seq if floor else 0
    assert floors["memory"] < later[0][2] <= later[-1][2] <= floors["search"], "the two stand at different positions"
    assert len(await _rows_of(app_pool, tables["search"], tenants)) == 10
    assert len(await _rows_of(app_pool, tables["memory"], tenants)) == 4

    # the upgrade: one consumer feeding both, taking over from the two
    consumer, fresh = f"merged-{uuid.uuid4().hex[:8]}", {part: recorder(part) for part in PARTS}
    parts = [Part(names[part], fresh[part]) for part in PARTS]
    async with merged(js, consumer, parts, pool, replaces=list(names.values())) as projection:
        newest = await publish(2)
        assert await eventually(lambda: settled(js, projection, newest[-1][2]))
        info = await js.consumer_info(RECALL_STREAM, consumer)
        for part in PARTS:
            assert not await exists(js, names[part]), "the replaced consumers are deleted"
    assert info.config.deliver_policy == DeliverPolicy.BY_START_SEQUENCE
    assert info.config.opt_start_seq == floors["memory"] + 1, "from the oldest event one of them had not acked"
    everything = early + later + newest
    for part in PARTS:
        applied = await _rows_of(app_pool, tables[part], tenants)
        assert sorted(e for e, _ in applied) == sorted(e for _, e, _ in everything), f"{part}: every event, once"
    # search had applied all 10 before: only the 2 newest are applied now, although 6 more were delivered again
    assert sorted(e for e, _ in fresh["search"].deliveries) == sorted(e for _, e, _ in newest)
    assert sorted(e for e, _ in fresh["memory"].deliveries) == sorted(e for _, e, _ in later + newest)

    # a later start finds the merged consumer where it stood and applies nothing again
    again = {part: recorder(part) for part in PARTS}
    parts = [Part(names[part], again[part]) for part in PARTS]
    async with merged(js, consumer, parts, pool, replaces=list(names.values())) as projection:
        last = await publish(1)
        assert await eventually(lambda: settled(js, projection, last[-1][2]))
    await js.delete_consumer(RECALL_STREAM, consumer)
    for part in PARTS:
        assert [e for e, _ in again[part].deliveries] == [last[0][1]]
        assert len(await _rows_of(app_pool, tables[part], tenants)) == len(everything) + 1


async def test_a_batch_delivered_again_to_the_merged_consumer_is_applied_once_per_projection(
    nats_client: Client, tables: dict[str, str], app_pool: Pool
) -> None:
    """Both projections' records are written in the batch's transaction: a redelivery finds them."""
    js, tenant, agent = nats_client.jetstream(), str(uuid.uuid4()), f"a{uuid.uuid4().hex[:8]}"
    publisher = EventPublisher(js)
    events = [recall_of(tenant, agent) for _ in range(5)]
    seqs = [(await publisher.publish(e)).seq for e in events]
    for number in range(2):  # the second consumer stands for a redelivery of everything the first applied
        recorders = {part: BatchRecorder(tables[part], {tenant}) for part in PARTS}
        consumer = f"merged-{uuid.uuid4().hex[:8]}"
        async with merged(js, consumer, [Part(f"p-{part}", recorders[part]) for part in PARTS], app_pool) as one:
            assert await eventually(lambda o=one: settled(js, o, seqs[-1]))  # type: ignore[misc]
        await js.delete_consumer(RECALL_STREAM, consumer)
        for part in PARTS:
            assert len(recorders[part].deliveries) == (5 if number == 0 else 0)
            assert [e for e, _ in await rows(app_pool, tables[part], tenant)] == [e.event_id for e in events]


async def test_the_merged_consumer_dead_letters_garbage_and_an_event_a_projection_keeps_failing(
    nats_client: Client, tables: dict[str, str], app_pool: Pool
) -> None:
    js, tenant, agent = nats_client.jetstream(), str(uuid.uuid4()), f"a{uuid.uuid4().hex[:8]}"
    publisher = EventPublisher(js)
    events = [recall_of(tenant, agent) for _ in range(4)]
    bad = events[2]
    recorders = {
        "search": BatchRecorder(tables["search"], {tenant}),
        "memory": BatchRecorder(tables["memory"], {tenant}, poison=frozenset({bad.event_id})),  # always fails
    }
    consumer = f"merged-{uuid.uuid4().hex[:8]}"
    garbage = b"\xff not an event " + tenant.encode()
    async with merged(js, consumer, [Part(f"p-{part}", recorders[part]) for part in PARTS], app_pool) as projection:
        seqs = [(await publisher.publish(e)).seq for e in events]
        junk = await js.publish(f"cairn.{tenant}.{agent}.recall.performed", garbage, stream=RECALL_STREAM)
        assert await eventually(lambda: settled(js, projection, max(*seqs, junk.seq)), within=30)
        letters = await eventually(lambda: stream_messages(js, DEAD_LETTER_STREAM, dead_letter_subject(consumer, "*")))
    await js.delete_consumer(RECALL_STREAM, consumer)
    assert sorted(m.data for m in letters if m.data == garbage) == [garbage], "dead-lettered once, not per part"
    # a new consumer reads the stream from its start: earlier tests' garbage is dead-lettered here too
    mine = [m for m in letters if tenant.encode() in (m.data or b"")]
    failed = [m for m in mine if m.data != garbage]
    assert len(failed) == 1
    assert bad.event_id.encode() in (failed[0].data or b"")
    assert (failed[0].headers or {})["Cairn-Error"].startswith("RuntimeError: poison")
    good = [e.event_id for e in events if e is not bad]
    for part in PARTS:  # the failing event is applied by neither (one transaction); every other one by both
        assert [e for e, _ in await rows(app_pool, tables[part], tenant)] == good


async def _rows_of(pool: Pool, table: str, tenants: Sequence[str]) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    for tenant in tenants:
        found += await rows(pool, table, tenant)
    return found


async def test_a_replica_that_took_over_first_wins_and_the_other_takes_its_consumer_as_it_stands(
    nats_client: Client, tables: dict[str, str], app_pool: Pool
) -> None:
    """Two replicas of a new release start together: both find no merged consumer, and the one that creates it
    second (from another start, the old consumers having moved or gone) takes the first one's instead of failing."""
    js, tenant, agent = nats_client.jetstream(), str(uuid.uuid4()), f"a{uuid.uuid4().hex[:8]}"
    publisher = EventPublisher(js)
    seqs = [(await publisher.publish(recall_of(tenant, agent))).seq for _ in range(3)]
    consumer, old = f"merged-{uuid.uuid4().hex[:8]}", f"old-{uuid.uuid4().hex[:8]}"
    await js.add_consumer(RECALL_STREAM, ConsumerConfig(name=old, durable_name=old, max_deliver=-1,
                                                       deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                                                       opt_start_seq=seqs[1]))  # fmt: skip

    class Second(Projection):
        async def _oldest_unacked_of_replaced(self) -> int | None:
            first = ConsumerConfig(name=consumer, durable_name=consumer, max_deliver=-1, ack_wait=BATCHED.ack_wait_s,
                                   deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=seqs[0])  # fmt: skip
            await js.add_consumer(RECALL_STREAM, first)  # the other replica, between the look and the creation
            return await super()._oldest_unacked_of_replaced()  # seqs[1]: another start

    recorders = {part: BatchRecorder(tables[part], {tenant}) for part in PARTS}
    parts = [Part(f"p-{part}-{uuid.uuid4().hex[:6]}", recorders[part]) for part in PARTS]
    second = Second(consumer, RECALL_STREAM, parts[0].handlers, app_pool, publisher, BATCHED)
    second._parts, second.replaces = tuple(parts), (old,)
    async with kept(second):
        assert await eventually(lambda: settled(js, second, seqs[-1]))
        info = await js.consumer_info(RECALL_STREAM, consumer)
    await js.delete_consumer(RECALL_STREAM, consumer)
    assert info.config.opt_start_seq == seqs[0], "the first replica's consumer, as it stands"
    assert not await exists(js, old)
    for part in PARTS:
        assert len(await rows(app_pool, tables[part], tenant)) == 3
