"""Background work of the memory index, polled: sessions whose debounce ran out are chunked, and chunks
embedded by another model than the configured one are re-embedded in batches (the search uses only
vectors of the configured model meanwhile, so the index is never mixed). A long transcript is chunked a
slice of turns per transaction. Idempotent; every replica may run it: a due session is claimed with SKIP
LOCKED. Due sessions of agents that do not remember have nothing to chunk: the look for due sessions drops
their marks itself (indexer.take_due_memory_sessions), without a transaction per session. Vectors of another model are
looked for at start and again every `reembed_check_s` once none are left: a replica still running the old model during a
rolling deploy, or a restored backup, writes some later. New chunks always get the configured model.

During such a deploy only the model of the most recently started live replica re-embeds
(indexer.claim_embedding_model): each look first claims the replica's model, and a replica whose model is not the
newest leaves the vectors alone instead of turning the new model's work back into its own.

A session whose chunking fails other than transiently (a row it cannot handle) is held back, with a growing
wait, and logged with its traceback; the other due sessions go on. A transient failure (Postgres away) ends
the round, and the next one retries; whatever else escapes is its supervisor's to restart."""

import asyncio
import logging
import uuid

import asyncpg

from cairn.delivery.faults import Backoff, describe, is_transient
from cairn.memindex import MemoryIndex, store
from cairn.memindex.embeddings import RemoteEmbeddingError
from cairn.storage.postgres import tenant_transaction

log = logging.getLogger(__name__)

# Due sessions of agents that do not remember come back finished (their marks dropped in the same call, 0096).
DUE_SESSIONS = "SELECT tenant_id::text, session_id, finished FROM indexer.take_due_memory_sessions($1)"
STALE_AGENTS = "SELECT tenant_id::text, agent_id, stale FROM indexer.stale_memory_agents($1)"
CLAIM_MODEL = "SELECT indexer.claim_embedding_model($1, $2, make_interval(secs => $3))"
# A claim not renewed within this many looks is a replica gone: the next newest model takes over.
LIVE_LOOKS = 4
REEMBED_BATCH = 64
HELD_BACK = Backoff(first_s=10.0, cap_s=3600.0)  # how long a session that failed waits before its next try


class MemoryWorker:
    consumer = "memory-index-worker"
    stream = "-"

    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]", index: MemoryIndex) -> None:
        self._pool, self._index = pool, index
        self._started = False  # whether this replica's model claim has been made since it started
        self._follows: str | None = None  # the newer model this replica leaves re-embedding to
        self._held_back: dict[tuple[str, uuid.UUID], tuple[int, float]] = {}  # session → (failures, until)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        look_for_stale_at = loop.time()
        while True:
            try:
                busy = await self.index_due_sessions()
                if loop.time() >= look_for_stale_at:
                    done = await self.reembed_some()
                    if not done:
                        look_for_stale_at = loop.time() + self._index.settings.reembed_check_s
                    busy += done
            except (asyncpg.PostgresError, RemoteEmbeddingError) as error:  # the next round retries
                log.error("memory index work failed, will retry: %s", error)
                busy = 0
            except Exception as error:
                if not is_transient(error):
                    raise
                log.error("memory index work failed, will retry: %s", error)
                busy = 0
            if not busy:
                await asyncio.sleep(self._index.settings.poll_s)

    async def index_due_sessions(self, limit: int = 50) -> int:
        async with self._pool.acquire() as conn:
            due = await conn.fetch(DUE_SESSIONS, limit)
        done = sum(1 for row in due if row["finished"])
        for row in due:
            if not row["finished"] and self._due_again(row["tenant_id"], row["session_id"]):
                done += await self._index_isolated(row["tenant_id"], row["session_id"])
        return done

    async def _index_isolated(self, tenant: str, session_id: uuid.UUID) -> int:
        """`index_session`, except that a session failing other than transiently is held back instead of
        stopping the worker for every other session (it stays due: a fix or a restart picks it up again)."""
        try:
            done = await self.index_session(tenant, session_id)
        except Exception as error:
            if is_transient(error) or isinstance(error, RemoteEmbeddingError):
                raise  # the embedding API or Postgres away: the round ends and the next one retries every session
            failures = self._held_back.get((tenant, session_id), (0, 0.0))[0] + 1
            wait = HELD_BACK.delay(failures - 1)
            self._held_back[(tenant, session_id)] = (failures, asyncio.get_running_loop().time() + wait)
            log.error("memory index: session %s of %s failed (%d in a row), held back %.0fs: %s", session_id, tenant,
                      failures, wait, describe(error), exc_info=error)  # fmt: skip
            return 0
        self._held_back.pop((tenant, session_id), None)
        return done

    def _due_again(self, tenant: str, session_id: uuid.UUID) -> bool:
        held = self._held_back.get((tenant, session_id))
        return held is None or asyncio.get_running_loop().time() >= held[1]

    async def index_session(self, tenant: str, session_id: uuid.UUID) -> int:
        """Chunk one slice of a due session if no other replica holds it; 1 when done, 0 when skipped. A long
        transcript stays due until its last slice: each round of the worker takes one slice of every due
        session, so a 10,000-turn import holds neither a transaction for minutes nor the sessions behind it."""
        async with tenant_transaction(self._pool, tenant) as conn:
            agent = await store.claim_pending(conn, uuid.UUID(tenant), session_id)
            if agent is None:
                return 0
            more = False
            if await store.remembers(conn, uuid.UUID(tenant), agent):
                slice_turns = self._index.settings.slice_turns
                more = (await self._index.index_session(conn, tenant, agent, session_id, slice_turns)).more
            if not more:
                await store.finish_pending(conn, uuid.UUID(tenant), session_id)
        return 1

    async def reembed_some(self) -> int:
        """One batch per agent whose vectors are of another model; returns how many chunks and turns got one."""
        model = self._index.embedder.model
        if model is None:
            return 0
        async with self._pool.acquire() as conn:
            live = LIVE_LOOKS * self._index.settings.reembed_check_s
            target = await conn.fetchval(CLAIM_MODEL, model, not self._started, live)
            self._started = True
            if target != model:
                if self._follows != target:
                    log.info("the newer embedding model %s re-embeds the memory index; %s leaves it alone", target,
                             model)  # fmt: skip
                self._follows = target
                return 0
            self._follows = None
            rows = await conn.fetch(STALE_AGENTS, model)
        stale: dict[tuple[str, str], int] = {}
        for row in rows:  # an agent can be listed for its chunks and for its turns
            key = (row["tenant_id"], row["agent_id"])
            stale[key] = stale.get(key, 0) + row["stale"]
        done = 0
        for (tenant, agent), left in stale.items():
            async with tenant_transaction(self._pool, tenant) as conn:
                done += await self._index.reembed(conn, tenant, agent, REEMBED_BATCH)
            log.info("re-embedding %s/%s with %s: %d chunks and turns left", tenant, agent, model,
                     max(left - REEMBED_BATCH, 0))  # fmt: skip
        return done
