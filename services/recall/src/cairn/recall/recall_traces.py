"""Recall traces (issue 29, "Trace"): what every recall did, stored in `recall.traces` for
`CAIRN_RECALL_TRACE_RETENTION_DAYS` and emitted as `recall.performed`.

Traces are best-effort, unlike messages. A message is the user's data and the source of truth, so its write is
acknowledged only once it is durable, and fails loudly otherwise. A trace is a diagnostic record *about* an answer
that has already been computed: the recall is the product, and holding its answer back, or failing it, because
Postgres or NATS is slow or down would turn an observability aid into an outage of the agent's replies (the very
stall issue 29 exists to prevent). So `save` waits for the write only briefly, lets it finish in the background
within its own bound, and a trace that cannot be stored is counted (`dropped`) and logged, never raised."""

import asyncio
import json
import logging
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeAlias, TypeVar

import asyncpg

from cairn.delivery.publisher import EventPublisher, acks_within
from cairn.events import RecallPerformed
from cairn.events.envelope import new_event_id
from cairn.storage.postgres import tenant_transaction

log = logging.getLogger(__name__)
T = TypeVar("T")
Connection: TypeAlias = "asyncpg.pool.PoolConnectionProxy[asyncpg.Record]"

INSERT_TRACE = """
INSERT INTO recall.traces (tenant_id, trace_id, agent_id, session_key, query, lane, outcome, reason, candidates,
                           injected, timings_ms, model, tokens, fallbacks, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10::jsonb, $11::jsonb, $12, $13::jsonb, $14, $15)
ON CONFLICT DO NOTHING
"""
_COLUMNS = """trace_id, agent_id, session_key, query, lane, outcome, reason, candidates::text, injected::text,
timings_ms::text, model, tokens::text, fallbacks, created_at"""
SELECT_TRACE = f"SELECT {_COLUMNS} FROM recall.traces WHERE tenant_id = $1 AND trace_id = $2"
# Served by traces_of_session (tenant_id, session_key, created_at DESC); the agent is a filter (a session key
# names its agent, so it only tells a key of another agent apart).
RECENT_TRACES = f"""
SELECT {_COLUMNS} FROM recall.traces
WHERE tenant_id = $1 AND session_key = $2 AND ($3::text IS NULL OR agent_id = $3)
ORDER BY created_at DESC, trace_id DESC
LIMIT $4
"""
FORGET_TRACES = "SELECT recall.forget_traces($1, $2)"
SET_TENANT = "SELECT set_config('cairn.tenant_id', $1, true)"
SWEEP_BATCH = 1000
SWEEP_BATCH_WITHIN_S = 60.0  # one batch of the sweep at most


def new_trace_id() -> str:
    """A UUIDv7, so trace ids sort by time like event ids; it is also the event's id and `Nats-Msg-Id`."""
    return new_event_id()


@dataclass(frozen=True)
class RecallTrace:
    trace_id: str  # a UUID (`new_trace_id`)
    agent_id: str
    session_key: str
    query: str
    lane: int | None
    outcome: str
    reason: str | None
    candidates: list[dict[str, Any]]  # {"lane", "path" | "session_key", "lines", "score", "snippet"}
    injected: list[dict[str, Any]]  # what went into the block
    timings_ms: dict[str, float]  # {"lane1", "lane2", "total", ...}
    model: str | None
    tokens: dict[str, int]  # {"prompt", "completion"}
    fallbacks: list[str] = field(default_factory=list)
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def event(self, tenant: str) -> RecallPerformed:
        return RecallPerformed(
            event_id=self.trace_id,
            tenant_id=tenant,
            agent_id=self.agent_id,
            occurred_at=self.created_at,
            session_key=self.session_key,
            outcome=self.outcome,
            lane=self.lane,
            items=len(self.injected),
            elapsed_ms=float(self.timings_ms.get("total", 0.0)),
            trace_id=self.trace_id,
            query=self.query,
            reason=self.reason,
            candidates=self.candidates,
            injected=self.injected,
            timings_ms=self.timings_ms,
            model=self.model,
            tokens=self.tokens,
            fallbacks=self.fallbacks,
        )


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _trace_of(row: asyncpg.Record) -> RecallTrace:
    return RecallTrace(
        trace_id=str(row["trace_id"]),
        agent_id=row["agent_id"],
        session_key=row["session_key"],
        query=row["query"],
        lane=row["lane"],
        outcome=row["outcome"],
        reason=row["reason"],
        candidates=json.loads(row["candidates"]),
        injected=json.loads(row["injected"]),
        timings_ms=json.loads(row["timings_ms"]),
        model=row["model"],
        tokens=json.loads(row["tokens"]),
        fallbacks=list(row["fallbacks"]),
        created_at=row["created_at"],
    )


async def _on_a_connection(
    pool: "asyncpg.Pool[asyncpg.Record]", within_s: float, work: Callable[[Connection], Coroutine[Any, Any, T]]
) -> T:
    """`work` on a connection of the pool, ended by TimeoutError after `within_s` however the connection
    behaves. Cancelling work on a connection that does not answer (Postgres partitioned away) is not enough: the
    cancellation's own clean-up (a ROLLBACK, asyncpg's cancel request) waits on the same silent network, for
    minutes. So a connection still busy at the bound is terminated (its socket closed) before the work is
    cancelled, and whatever it was waiting for fails at once."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    async with asyncio.timeout_at(deadline):  # a new connection that does not come up: given up when cancelled
        conn = await pool.acquire()
    running: asyncio.Task[T] = asyncio.create_task(work(conn))
    try:
        done, _ = await asyncio.wait({running}, timeout=max(0.0, deadline - loop.time()))
        if not done:
            raise TimeoutError(f"Postgres did not answer within {within_s:g}s")
        return running.result()
    finally:
        if not running.done():  # the bound, or this task cancelled (a shutdown)
            conn.terminate()
            running.cancel()
            await asyncio.wait({running})
            if not running.cancelled():
                running.exception()  # retrieved: the closed connection's error says nothing more
        await pool.release(conn)


def _uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


class TraceStore:
    """Stores, reads and announces recall traces. `save` is the recall's only call on the write side: bounded by
    `save_wait_s` for the answer, by `store_within_s` for the write and the publish it leaves running."""

    def __init__(
        self,
        pool: "asyncpg.Pool[asyncpg.Record]",
        publisher: EventPublisher | None,
        *,
        save_wait_s: float = 0.1,
        store_within_s: float = 5.0,
        max_pending: int = 1000,
    ) -> None:
        self._pool = pool
        self._publisher = publisher
        self.save_wait_s = save_wait_s
        self.store_within_s = store_within_s
        self.max_pending = max_pending  # writes and publishes in the background at most (an outage's backlog)
        self.dropped = 0  # traces that could not be stored
        self.unannounced = 0  # `recall.performed` events that could not be published
        self._pending: set[asyncio.Task[None]] = set()

    async def save(self, tenant: str, trace: RecallTrace) -> None:
        """Store the trace and publish `recall.performed`; returns once it is stored or after `save_wait_s`,
        whichever comes first (the write goes on in the background, bounded). Never raises."""
        if len(self._pending) >= self.max_pending:
            self.dropped += 1
            log.warning("recall trace %s dropped (%d so far): %d writes still pending", trace.trace_id, self.dropped,
                        len(self._pending))  # fmt: skip
            return
        try:
            stored = self._background(self._store(tenant, trace), f"recall-trace-store-{trace.trace_id}")
            if self._publisher is not None:
                self._background(self._announce(tenant, trace), f"recall-trace-announce-{trace.trace_id}")
            await asyncio.wait({stored}, timeout=self.save_wait_s)
        except Exception:  # a trace must never fail the recall that it describes
            self.dropped += 1
            log.exception("recall trace %s not saved", trace.trace_id)

    def _background(self, work: Any, name: str) -> "asyncio.Task[None]":
        task: asyncio.Task[None] = asyncio.create_task(work, name=name)
        self._pending.add(task)  # held, so the loop does not collect it half-way
        task.add_done_callback(self._pending.discard)
        return task

    async def settled(self, within_s: float) -> bool:
        """Wait (bounded) for the writes and publishes still in the background; whether none is left."""
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=within_s)
        return not self._pending

    async def _store(self, tenant: str, trace: RecallTrace) -> None:
        async def insert(conn: Connection) -> None:
            async with conn.transaction():
                await conn.execute(SET_TENANT, tenant)
                await conn.execute(
                    INSERT_TRACE, uuid.UUID(tenant), uuid.UUID(trace.trace_id), trace.agent_id, trace.session_key,
                    trace.query, trace.lane, trace.outcome, trace.reason, _json(trace.candidates),
                    _json(trace.injected), _json(trace.timings_ms), trace.model, _json(trace.tokens),
                    list(trace.fallbacks), trace.created_at,
                )  # fmt: skip

        try:
            await _on_a_connection(self._pool, self.store_within_s, insert)
        except Exception as error:  # Postgres down, slow, or refusing the row: counted, logged
            self.dropped += 1
            log.warning("recall trace %s dropped (%d so far): %s", trace.trace_id, self.dropped, _said(error))

    async def _announce(self, tenant: str, trace: RecallTrace) -> None:
        try:
            with acks_within(self.store_within_s):
                async with asyncio.timeout(self.store_within_s):
                    assert self._publisher is not None
                    await self._publisher.publish(trace.event(tenant), msg_id=trace.trace_id)
        except Exception as error:  # NATS away: the stored trace remains
            self.unannounced += 1
            log.warning("recall.performed for %s not published (%d so far): %s", trace.trace_id, self.unannounced,
                        _said(error))  # fmt: skip

    async def get(self, tenant: str, trace_id: str) -> RecallTrace | None:
        """The tenant's trace; None for an unknown id, one that is not a UUID, or another tenant's."""
        key = _uuid(trace_id)
        if key is None:
            return None
        async with tenant_transaction(self._pool, tenant) as conn:
            row = await conn.fetchrow(SELECT_TRACE, uuid.UUID(tenant), key)
        return None if row is None else _trace_of(row)

    async def recent(self, tenant: str, agent: str | None, session_key: str, limit: int) -> list[RecallTrace]:
        """The session's latest traces, newest first."""
        async with tenant_transaction(self._pool, tenant) as conn:
            rows = await conn.fetch(RECENT_TRACES, uuid.UUID(tenant), session_key, agent, limit)
        return [_trace_of(row) for row in rows]

    async def forget_older_than(self, days: float, batch: int = SWEEP_BATCH) -> int:
        """Delete every tenant's traces older than `days` (at least a day: the table's policies), in batches of
        `batch` so no transaction holds many rows; how many went."""
        before = datetime.now(UTC) - timedelta(days=days)
        total = 0

        async def forget(conn: Connection) -> int:
            return int(await conn.fetchval(FORGET_TRACES, before, batch))

        while True:
            gone = await _on_a_connection(self._pool, SWEEP_BATCH_WITHIN_S, forget)
            total += gone
            if gone < batch:
                return total


def _said(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


class TraceSweep:
    """The retention of traces, run as one of the recall service's background tasks: every `every_s`, delete the
    traces older than `retention_days`. A periodic sweep rather than a prune on write, so that the traces of a
    tenant that stopped recalling go too. Every replica sweeps; the deletes of two at once only find fewer rows.
    A pass that fails is logged and tried again at the next one: like the traces, their sweep must not take the
    recall out of service (a crash would make the replica not ready under its supervisor)."""

    consumer = "recall-trace-sweep"
    stream = "-"

    def __init__(self, store: TraceStore, retention_days: float, every_s: float) -> None:
        self._store = store
        self.retention_days = retention_days
        self.every_s = every_s

    async def run(self) -> None:
        while True:
            try:
                gone = await self._store.forget_older_than(self.retention_days)
            except Exception as error:  # Postgres away, or the sweep refused: the next pass tries again
                log.warning("recall traces: the retention sweep failed, next in %gs: %s", self.every_s, _said(error))
            else:
                if gone:
                    log.info("recall traces: %d older than %g days deleted", gone, self.retention_days)
            await asyncio.sleep(self.every_s)
