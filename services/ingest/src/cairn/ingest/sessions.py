"""Read-only look-ups in the session service's tables, for commands that must answer 404 (or 422) at once:
the session service consumes events and cannot answer HTTP itself.

A session or message may be on its way: accepted into CAIRN_INGEST a moment ago, not yet applied. So
before answering "unknown", the directory waits (bounded) until the session service's consumers have
applied everything the stream held when the question was asked, then looks again.
"""

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import cast

import asyncpg
from nats.js import JetStreamContext
from nats.js.api import ConsumerInfo

from cairn.events import INGEST_STREAM, SESSION_CONSUMER
from cairn.events.models import ChatType
from cairn.storage.postgres import tenant_transaction

FIND_SESSION = """
SELECT session_id, chat_type FROM session.sessions WHERE tenant_id = $1 AND agent_id = $2 AND session_key = $3
"""
# Our message id (a uuid) or the adapter's id, within one session.
FIND_MESSAGE = """
SELECT 1 FROM session.entries
WHERE tenant_id = $1 AND session_id = $2 AND kind = 'message' AND (message_id = $3 OR external_id = $4)
"""


@dataclass(frozen=True)
class KnownSession:
    session_id: str
    chat_type: ChatType


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def _applied_up_to(consumer: ConsumerInfo, target: int) -> bool:
    """Whether a (possibly subject-filtered) consumer has nothing left at or before stream sequence `target`."""
    floor = consumer.ack_floor.stream_seq if consumer.ack_floor else 0
    return (floor or 0) >= target or (not consumer.num_pending and not consumer.num_ack_pending)


class SessionDirectory:
    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]", js: JetStreamContext, wait_s: float) -> None:
        self._pool, self._js, self._wait_s = pool, js, wait_s

    async def session(self, tenant: str, agent: str, key: str) -> KnownSession | None:
        found = await self._find_session(tenant, agent, key)
        if found is None:
            await self._catch_up()
            found = await self._find_session(tenant, agent, key)
        return found

    async def has_message(self, tenant: str, session_id: str, message_id: str) -> bool:
        found = await self._find_message(tenant, session_id, message_id)
        if not found:
            await self._catch_up()
            found = await self._find_message(tenant, session_id, message_id)
        return found

    async def _find_session(self, tenant: str, agent: str, key: str) -> KnownSession | None:
        async with tenant_transaction(self._pool, tenant) as conn:
            row = await conn.fetchrow(FIND_SESSION, tenant, agent, key)
        # the session service writes only chat types of validated events
        return KnownSession(str(row["session_id"]), cast(ChatType, row["chat_type"])) if row else None

    async def _find_message(self, tenant: str, session_id: str, message_id: str) -> bool:
        async with tenant_transaction(self._pool, tenant) as conn:
            row = await conn.fetchrow(FIND_MESSAGE, tenant, uuid.UUID(session_id), _as_uuid(message_id), message_id)
        return row is not None

    async def _catch_up(self) -> None:
        """Wait until the session service has applied what the stream holds now, or the bound is hit."""
        target = (await self._js.stream_info(INGEST_STREAM)).state.last_seq
        deadline = time.monotonic() + self._wait_s
        while True:
            consumers = [
                c
                for c in await self._js.consumers_info(INGEST_STREAM)
                if c.name == SESSION_CONSUMER or c.name.startswith(f"{SESSION_CONSUMER}-")
            ]
            if all(_applied_up_to(c, target) for c in consumers) or time.monotonic() >= deadline:
                return
            await asyncio.sleep(0.05)
