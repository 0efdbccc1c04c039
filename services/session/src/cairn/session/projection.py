"""The session service's projection: its handlers over the events of a fetched batch, of one tenant or of
several in one transaction (`across_tenants`).

The handlers run one event at a time, as ever, against `BatchedTranscripts`: before a run of messages, one
prefetch creates and locks every session the run touches, whatever its tenant; after the last event, one flush
writes every entry and session. Commands and agent settings run in between on the plain store's statements.
"""

from collections.abc import Sequence
from itertools import takewhile
from typing import Any

from cairn.delivery.consumer import Delivery, Unit
from cairn.events import AgentConfigured, Event, MessageReceived, SessionCommand
from cairn.events.routing import is_incognito
from cairn.session.batched import BatchedTranscripts, Opening
from cairn.session.handlers import SessionHandlers
from cairn.session.settings import SessionSettings

HANDLED = frozenset({MessageReceived, SessionCommand, AgentConfigured})


class SessionProjection:
    across_tenants = True  # every statement of BatchedTranscripts and PostgresTranscripts names its tenant

    def __init__(self, settings: SessionSettings) -> None:
        self._handlers = SessionHandlers(settings)

    def handles(self, event: Event) -> bool:
        return type(event) in HANDLED

    def begin(self, conn: Any, events: Sequence[Event]) -> Unit:
        return _Batch(self._handlers, BatchedTranscripts(conn), events)


class _Batch:
    def __init__(self, handlers: SessionHandlers, store: BatchedTranscripts, events: Sequence[Event]) -> None:
        self._handlers, self._store, self._events = handlers, store, events
        self._next = self._prefetched = 0  # the index of the next event; the first one not prefetched

    async def handle(self, event: Event, delivery: Delivery) -> Sequence[Event]:
        index, self._next = self._next, self._next + 1
        assert self._events[index] is event, "events are handled in the order the batch was begun with"
        seq = delivery.stream_seq
        if isinstance(event, MessageReceived):
            if index >= self._prefetched:
                await self._prefetch(index)
            return await self._handlers.on_message(self._store, event, seq)
        if isinstance(event, SessionCommand):
            return await self._handlers.on_command(self._store, event, seq)
        assert isinstance(event, AgentConfigured)
        return await self._handlers.on_configured(self._store, event)

    async def _prefetch(self, start: int) -> None:
        """Everything the run of messages from `start` (up to the next command) will open, in a few statements."""
        run = list(takewhile(lambda e: isinstance(e, MessageReceived), self._events[start:]))
        self._prefetched = start + len(run)
        # an incognito key never gets a row, not even an empty one (the handler refuses its messages)
        messages = [e for e in run if isinstance(e, MessageReceived) and not is_incognito(e.session_key)]
        # one opening per session (in the order of first mention, with the last message's chat type and channel,
        # as the store keeps them), not one per message
        last = {(e.tenant_id, e.agent_id, e.session_key): e.message for e in messages}
        openings = [Opening(*key, message.chat_type, message.channel) for key, message in last.items()]
        adapter_ids = [(e.tenant_id, e.message.channel, e.message.message_id) for e in messages if e.message.message_id]
        await self._store.prefetch(openings, adapter_ids)

    async def complete(self) -> None:
        await self._store.flush()
