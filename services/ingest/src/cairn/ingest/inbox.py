"""Adapters that speak NATS publish raw messages to `cairn.in.<tenant>.message`; ingest validates
them exactly as it validates `POST /v1/messages` and publishes `message.received`. A message that
cannot be accepted goes to the dead-letter stream with the reason, never silently away.

A message for an incognito thread goes to the in-memory thread store, and the inbox (a work queue)
forgets it once acked; one that cannot be kept is dead-lettered without its body, which must never be
stored. Adapters that must not have incognito text touch JetStream at all post it over HTTP instead."""

import uuid
from collections.abc import Sequence

import asyncpg
from nats.aio.msg import Msg
from pydantic import ValidationError

from cairn.delivery.publisher import EventPublisher
from cairn.delivery.pull import PullConsumer
from cairn.edge.problems import Problem
from cairn.events import INBOX_STREAM, InboundMessage
from cairn.events.routing import INCOGNITO_PREFIX, RoutingError, is_incognito
from cairn.ingest import incognito
from cairn.ingest.domain import dedup_ids, received, refusal
from cairn.ingest.incognito_store import IncognitoThreads
from cairn.ingest.settings import IngestSettings
from cairn.ingest.store import AgentConfigs
from cairn.storage.postgres import tenant_transaction

TENANT_EXISTS = "SELECT 1 FROM ingest.tenants WHERE tenant_id = $1"


def tenant_of(subject: str) -> str | None:
    """`cairn.in.<tenant>.message` → the tenant, when it is a UUID."""
    parts = subject.split(".")
    try:
        return str(uuid.UUID(parts[2])) if len(parts) == 4 else None
    except ValueError:
        return None


class Inbox(PullConsumer):
    def __init__(
        self,
        pool: "asyncpg.Pool[asyncpg.Record]",
        publisher: EventPublisher,
        settings: IngestSettings,
        configs: AgentConfigs,
        threads: IncognitoThreads,
    ) -> None:
        super().__init__("ingest", INBOX_STREAM, publisher.js, settings.nats)
        self._pool, self._publisher, self._configs, self._incognito = pool, publisher, configs, threads
        self._max_text_bytes = settings.max_text_bytes
        self._known: set[str] = set()

    async def process_batch(self, messages: Sequence[Msg]) -> None:
        for raw in messages:
            problem = await self._accept(raw)
            if problem is None:
                continue
            if INCOGNITO_PREFIX.encode() in raw.data:
                # what may belong to an incognito thread is never stored: no body, no quoted input
                await self.dead_letter(raw, problem.splitlines()[0], keep_data=False)
            else:
                await self.dead_letter(raw, problem)

    async def _accept(self, raw: Msg) -> str | None:
        """Publish the message's event and ack; or say why it cannot be accepted."""
        tenant = tenant_of(raw.subject)
        if tenant is None or not await self._tenant_exists(tenant):
            return f"no such tenant in subject {raw.subject!r}"
        try:
            message = InboundMessage.model_validate_json(raw.data)
            refused = refusal(message, self._max_text_bytes)
            if refused is not None:
                return f"refused message ({refused.status}): {refused.field}: {refused.message}"
            if message.session_key and is_incognito(message.session_key):
                return await self._keep_incognito(raw, tenant, message, message.session_key)
            event = received(tenant, message, await self._configs.routing(tenant, message.agent_id))
        except ValidationError as error:
            return f"invalid message: {error}"
        except RoutingError as error:
            return f"invalid message: {error.field}: {error}"
        await self._publisher.publish_many([event], dedup_ids([event]))
        await raw.ack()
        self.counts.applied += 1
        return None

    async def _keep_incognito(self, raw: Msg, tenant: str, message: InboundMessage, key: str) -> str | None:
        try:
            await incognito.append(self._incognito, tenant, key, message)
        except Problem as problem:
            return f"incognito message not kept ({problem.status}): {problem.detail}"
        await raw.ack()
        self.counts.applied += 1
        return None

    async def _tenant_exists(self, tenant: str) -> bool:
        if tenant not in self._known:
            async with tenant_transaction(self._pool, tenant) as conn:
                if await conn.fetchval(TENANT_EXISTS, tenant) is None:
                    return False
            self._known.add(tenant)
        return True
