"""Recall traces in the real Postgres and NATS (issue 29, "Trace"): a saved trace reads back whole and is announced
as `recall.performed` (Nats-Msg-Id = trace id); a session's traces list newest first; another tenant sees none of
them; a Postgres that refuses or never answers costs the recall at most the save's short wait, raises nothing and
counts the trace as dropped; the retention sweep deletes old traces of every tenant but never one under a day."""

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from nats.aio.client import Client
from pydantic import SecretStr

from cairn.delivery.frames import MSG_ID
from cairn.delivery.publisher import EventPublisher
from cairn.events import RECALL_STREAM, RecallPerformed, decode_event
from cairn.events.streams import subject_pattern
from cairn.local import LocalStack
from cairn.local.processes import free_port
from cairn.local.stack import DATABASE
from cairn.recall.recall_traces import RecallTrace, TraceStore, TraceSweep, new_trace_id
from cairn.storage.postgres import create_pool
from cairn.storage.settings import PostgresSettings
from tests.integration.conftest import eventually, holds_for
from tests.integration.partition import Partition

pytestmark = pytest.mark.integration
OUTER_BOUND_S = 10.0  # far above the save's own wait: only a save that waits on the outage takes this long


def trace(session_key: str = "agent:main:main", created_at: datetime | None = None, **fields: object) -> RecallTrace:
    values: dict[str, object] = {
        "trace_id": new_trace_id(),
        "agent_id": "main",
        "session_key": session_key,
        "query": "我下周有什么安排？\n(recent) 我们上次说的方案",
        "lane": 2,
        "outcome": "injected",
        "reason": None,
        "candidates": [
            {"lane": 1, "path": "MEMORY.md", "lines": [3, 4], "score": 0.41, "snippet": "用户不吃辣"},
            {
                "lane": 2,
                "session_key": "agent:main:telegram:direct:123",
                "lines": [7, 7],
                "score": 0.83,
                "snippet": "下周二我去上海参加产品发布会",
            },
        ],
        "injected": [{"snippet": "Tuesday: product launch in Shanghai", "source": "sessions/…#L7"}],
        "timings_ms": {"lane1": 6.25, "lane2": 812.5, "total": 820.0},
        "model": "qwen2.5:7b",
        "tokens": {"prompt": 812, "completion": 24},
        "fallbacks": ["extractive summary: no model configured"],
        "created_at": created_at or datetime.now(UTC),
    }
    values.update(fields)
    return RecallTrace(**values)  # type: ignore[arg-type]


@pytest.fixture
def tenants() -> tuple[str, str]:
    return str(uuid.uuid4()), str(uuid.uuid4())


async def test_a_saved_trace_reads_back_whole_and_is_announced_with_its_id(
    app_pool: "asyncpg.Pool[asyncpg.Record]", nats_client: Client, tenants: tuple[str, str]
) -> None:
    tenant, _ = tenants
    js = nats_client.jetstream()
    subscription = await js.pull_subscribe(subject_pattern("recall.performed", tenant), stream=RECALL_STREAM)
    store = TraceStore(app_pool, EventPublisher(js))
    saved = trace()
    await store.save(tenant, saved)
    assert await store.settled(OUTER_BOUND_S)
    assert await store.get(tenant, saved.trace_id) == saved
    assert (store.dropped, store.unannounced) == (0, 0)

    [message] = await subscription.fetch(1, timeout=OUTER_BOUND_S)
    assert message.headers is not None
    assert message.headers[MSG_ID] == saved.trace_id
    event = decode_event(message.data)
    assert isinstance(event, RecallPerformed)
    assert (event.trace_id, event.event_id, event.tenant_id) == (saved.trace_id, saved.trace_id, tenant)
    assert (event.outcome, event.lane, event.items, event.elapsed_ms) == ("injected", 2, 1, 820.0)
    assert (event.candidates, event.injected, event.tokens) == (saved.candidates, saved.injected, saved.tokens)


async def test_a_sessions_traces_list_newest_first_within_the_limit(
    app_pool: "asyncpg.Pool[asyncpg.Record]", tenants: tuple[str, str]
) -> None:
    tenant, _ = tenants
    store = TraceStore(app_pool, None)
    now = datetime.now(UTC)
    session = [trace(created_at=now - timedelta(seconds=s)) for s in (30, 10, 20)]
    elsewhere = trace("agent:main:dashboard:d1", created_at=now)
    other_agent = trace("agent:main:main", created_at=now, agent_id="helper")
    for t in [*session, elsewhere, other_agent]:
        await store.save(tenant, t)
    assert await store.settled(OUTER_BOUND_S)
    newest_first = [session[1], session[2], session[0]]
    assert await store.recent(tenant, "main", "agent:main:main", 20) == newest_first
    assert await store.recent(tenant, "main", "agent:main:main", 2) == newest_first[:2]
    assert await store.recent(tenant, None, "agent:main:main", 20) == [other_agent, *newest_first]
    assert await store.recent(tenant, "main", "agent:main:dashboard:d1", 20) == [elsewhere]


async def test_another_tenant_reads_none_of_a_tenants_traces(
    app_pool: "asyncpg.Pool[asyncpg.Record]", tenants: tuple[str, str]
) -> None:
    tenant, other = tenants
    store = TraceStore(app_pool, None)
    saved = trace()
    await store.save(tenant, saved)
    assert await store.settled(OUTER_BOUND_S)
    assert await store.get(tenant, saved.trace_id) == saved
    assert await store.get(other, saved.trace_id) is None
    assert await store.recent(other, None, saved.session_key, 100) == []
    assert await store.get(tenant, "not-a-uuid") is None
    assert await store.get(tenant, new_trace_id()) is None


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers: a Postgres that hangs (a partition, a full host)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


@pytest.fixture(params=["refused", "silent"])
async def unreachable_pool(
    request: pytest.FixtureRequest, silent_port: int
) -> AsyncIterator["asyncpg.Pool[asyncpg.Record]"]:
    """A pool (opened while nothing is connected, as a service's pool is after its connections dropped) to a
    Postgres that refuses connections or never answers."""
    port = silent_port if request.param == "silent" else free_port()
    url = SecretStr(f"postgresql://cairn_app:x@127.0.0.1:{port}/cairn")
    pool = await create_pool(PostgresSettings(url=url, pool_min=0, pool_max=2), connect_timeout_s=60)
    try:
        yield pool
    finally:
        pool.terminate()


async def test_a_save_while_postgres_is_unreachable_returns_within_its_wait_and_counts_the_dropped_trace(
    unreachable_pool: "asyncpg.Pool[asyncpg.Record]", tenants: tuple[str, str]
) -> None:
    store = TraceStore(unreachable_pool, None, save_wait_s=0.1, store_within_s=0.5)
    tenant, _ = tenants
    async with asyncio.timeout(OUTER_BOUND_S):  # a save waiting on the connection (60 s) would not end here
        await store.save(tenant, trace())
        await store.save(tenant, trace())
    assert await store.settled(OUTER_BOUND_S)  # the writes left behind end within their own bound
    assert store.dropped == 2


async def test_a_save_while_postgres_is_partitioned_away_is_bounded_and_traces_are_stored_again_after(
    stack: LocalStack, tenants: tuple[str, str]
) -> None:
    """A pool whose connections are established when the network to Postgres goes silent: the answer waits at
    most `save_wait_s`, the write gives up at `store_within_s`, and once the network is back traces are stored."""
    tenant, _ = tenants
    async with Partition(stack.state.ports["postgres"]) as relay:
        url = f"postgresql://cairn_app:{stack.state.password('cairn_app')}@127.0.0.1:{relay.port}/{DATABASE}"
        pool = await create_pool(PostgresSettings(url=SecretStr(url), pool_min=1, pool_max=2), connect_timeout_s=2)
        try:
            store = TraceStore(pool, None, save_wait_s=0.1, store_within_s=1.0)
            before = trace()
            await store.save(tenant, before)
            assert await store.settled(OUTER_BOUND_S)
            relay.partition()
            lost = trace()
            async with asyncio.timeout(OUTER_BOUND_S):
                await store.save(tenant, lost)
            assert await store.settled(OUTER_BOUND_S), "a write kept waiting on the partitioned connection"
            assert store.dropped == 1
            relay.heal()
            after = trace()

            async def stored_again() -> bool:
                await store.save(tenant, after)
                await store.settled(OUTER_BOUND_S)
                return await store.get(tenant, after.trace_id) == after

            assert await eventually(stored_again, within=OUTER_BOUND_S)
            assert await store.get(tenant, before.trace_id) == before
        finally:
            pool.terminate()


async def test_while_postgres_hangs_the_writes_left_behind_are_bounded_in_number(
    silent_port: int, tenants: tuple[str, str]
) -> None:
    """An outage must not pile up a write per recall for as long as it lasts: past `max_pending`, a trace is
    dropped at once."""
    url = SecretStr(f"postgresql://cairn_app:x@127.0.0.1:{silent_port}/cairn")
    pool = await create_pool(PostgresSettings(url=url, pool_min=0, pool_max=2), connect_timeout_s=60)
    try:
        store = TraceStore(pool, None, save_wait_s=0.05, store_within_s=2.0, max_pending=2)
        tenant, _ = tenants
        async with asyncio.timeout(OUTER_BOUND_S):
            for _ in range(5):
                await store.save(tenant, trace())
        assert store.dropped == 3  # refused at once; the two pending ones are still waiting on the connection
        assert await store.settled(OUTER_BOUND_S)
        assert store.dropped == 5
    finally:
        pool.terminate()


async def test_the_retention_sweep_deletes_old_traces_of_every_tenant_and_nothing_under_a_day(
    app_pool: "asyncpg.Pool[asyncpg.Record]", tenants: tuple[str, str]
) -> None:
    one, two = tenants
    store = TraceStore(app_pool, None)
    now = datetime.now(UTC)
    old_one, old_two = trace(created_at=now - timedelta(days=31)), trace(created_at=now - timedelta(days=45))
    kept = trace(created_at=now - timedelta(days=29))
    half_day = trace(created_at=now - timedelta(hours=12))
    for tenant, t in [(one, old_one), (two, old_two), (one, kept), (two, half_day)]:
        await store.save(tenant, t)
    assert await store.settled(OUTER_BOUND_S)

    assert await store.forget_older_than(30, batch=1) >= 2  # other tests' old traces may go too
    assert await store.get(one, old_one.trace_id) is None
    assert await store.get(two, old_two.trace_id) is None
    assert await store.get(one, kept.trace_id) == kept

    await store.forget_older_than(0.25)  # a setting under a day: the table's policies still keep the trace
    assert await store.get(two, half_day.trace_id) == half_day


async def test_the_sweep_task_deletes_old_traces_and_outlives_a_pass_that_failed(
    app_pool: "asyncpg.Pool[asyncpg.Record]", unreachable_pool: "asyncpg.Pool[asyncpg.Record]", tenants: tuple[str, str]
) -> None:
    tenant, _ = tenants
    store = TraceStore(app_pool, None)
    old = trace(created_at=datetime.now(UTC) - timedelta(days=40))
    await store.save(tenant, old)
    assert await store.settled(OUTER_BOUND_S)
    failing = asyncio.create_task(TraceSweep(TraceStore(unreachable_pool, None), 30, every_s=0.05).run())
    sweeping = asyncio.create_task(TraceSweep(store, 30, every_s=0.05).run())
    try:

        async def gone() -> bool:
            return await store.get(tenant, old.trace_id) is None

        async def running() -> bool:
            return not failing.done()

        assert await eventually(gone, within=OUTER_BOUND_S)
        assert await holds_for(running, seconds=1.5)  # passes against a Postgres that is away fail, and it goes on
    finally:
        for task in (failing, sweeping):
            task.cancel()
        await asyncio.wait({failing, sweeping})
