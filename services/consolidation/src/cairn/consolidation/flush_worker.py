"""The pre-compaction flush worker: polls due flushes and does each as a silent model turn over its window.

A flush is claimed in its tenant's transaction (FOR UPDATE SKIP LOCKED), which stays open through the model
call and commits the outcome with it: a second replica skips the row, and a replica killed mid-flush leaves it
due (its transaction never commits) for the next look. The notes go out as a `memory.write-requested` append to
the day's note under an id fixed per cycle, published before the flush is recorded done: a flush done twice
(killed between the two) asks for the same write, which consolidation applies once.

A model that is down or answers something unusable fails the attempt: counted, its error kept, tried again
after a growing wait. With no model for the tenant the flush stays due and says so; nothing is faked.
"""

import asyncio
import logging

import asyncpg

from cairn.consolidation.flush import (
    NO_MODEL,
    PURPOSE,
    RETRY,
    daily_note_path,
    heading,
    plan_flush,
    prompt,
    tool_spec,
    window_text,
    write_id,
)
from cairn.consolidation.flush_store import DUE_FLUSHES, Claimed, DueFlush, FlushStore, Window
from cairn.delivery.faults import Backoff, describe, is_transient
from cairn.delivery.publisher import EventPublisher
from cairn.events import MemoryWriteRequested
from cairn.llm import ModelClient, ModelError, Models
from cairn.storage.postgres import tenant_transaction

log = logging.getLogger(__name__)

MAX_NOTE_TOKENS = 1_000  # the answer's bound: notes, not an essay


class FlushWorker:
    consumer = "memory-flush-worker"
    stream = "-"

    def __init__(
        self,
        pool: "asyncpg.Pool[asyncpg.Record]",
        models: Models,
        publisher: EventPublisher,
        *,
        poll_s: float = 1.0,
        retry_first_s: float = RETRY.first_s,
        no_model_recheck_s: float = 30.0,
    ) -> None:
        self._pool, self._models, self._publisher = pool, models, publisher
        self._poll_s, self._no_model_recheck_s = poll_s, no_model_recheck_s
        self._retry = Backoff(first_s=retry_first_s, cap_s=RETRY.cap_s)

    async def run(self) -> None:
        while True:
            try:
                busy = await self.flush_due()
            except (asyncpg.PostgresError, OSError) as error:  # the next look retries
                log.error("memory flushes failed, will retry: %s", error)
                busy = 0
            except Exception as error:
                if not is_transient(error):
                    raise
                log.error("memory flushes failed, will retry: %s", error)
                busy = 0
            if not busy:
                await asyncio.sleep(self._poll_s)

    async def flush_due(self, limit: int = 20) -> int:
        """Every flush due now that no other replica holds; how many were attempted."""
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(DUE_FLUSHES, limit)
        attempted = 0
        for row in rows:
            due = DueFlush(row["tenant_id"], row["session_id"], row["reset_index"], row["cycle"])
            attempted += await self._flush_isolated(due)
        return attempted

    async def _flush_isolated(self, due: DueFlush) -> int:
        """`flush`, except that a flush failing other than transiently (something in its window it cannot
        handle) is recorded as a failure and waits its backoff, instead of stopping every other flush behind it."""
        try:
            return await self.flush(due)
        except Exception as error:
            if is_transient(error):
                raise  # Postgres or NATS away: the round ends and the next look retries every flush
            log.error("flush %s failed, held back: %s", due, describe(error), exc_info=error)
            async with tenant_transaction(self._pool, due.tenant_id) as conn:
                store = FlushStore(conn)
                claimed = await store.claim(due)
                if claimed is not None:
                    await store.failed(due, describe(error), self._retry.delay(claimed.failures))
            return 0

    async def flush(self, due: DueFlush) -> int:
        client = await self._models.for_tenant(due.tenant_id)
        async with tenant_transaction(self._pool, due.tenant_id) as conn:
            store = FlushStore(conn)
            claimed = await store.claim(due)
            if claimed is None:  # another replica has it, or it was done meanwhile
                return 0
            if client is None:
                await store.wait_for_model(due, NO_MODEL, self._no_model_recheck_s)
                return 0
            window = await store.window(due, claimed)
            await self._turn(store, client, due, claimed, window)
        return 1

    async def _turn(
        self, store: FlushStore, client: ModelClient, due: DueFlush, claimed: Claimed, window: Window
    ) -> None:
        text = window_text(window.lines)
        if not text or window.last_at is None:  # nothing said since the last flush of this window
            await store.done(due, window, None, 0, ())
            return
        path = daily_note_path(window.last_at, window.timezone)
        try:
            result = await client.chat(prompt(text, path), tools=tool_spec(path), max_tokens=MAX_NOTE_TOKENS)
        except ModelError as error:
            await self._models.record_usage(due.tenant_id, PURPOSE, None, failed=True, model=client.model)
            wait = self._retry.delay(claimed.failures)
            log.warning("flush of %s cycle %d failed (%s), again in %.1f s", claimed.session_key, due.cycle, error,
                        wait)  # fmt: skip
            await store.failed(due, str(error), wait)
            return
        await self._models.record_usage(due.tenant_id, PURPOSE, result)
        plan = plan_flush(result.tool_calls, path, heading(window.last_at, claimed.session_key, due.cycle))
        for refusal in plan.refused:
            log.warning("flush of %s cycle %d: %s", claimed.session_key, due.cycle, refusal)
        if plan.text:
            request = MemoryWriteRequested(
                event_id=write_id(*due.key()), tenant_id=due.tenant_id, agent_id=claimed.agent_id, path=path,
                mode="append", text=plan.text,
            )  # fmt: skip
            await self._publisher.publish(request)
        await store.done(due, window, path if plan.text else None, len(plan.text), plan.refused)
