"""Publishing events to JetStream. The event id is the `Nats-Msg-Id` (unless a caller gives an
idempotency key), so a re-publish is deduplicated; trace context travels in the headers."""

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from nats.js import JetStreamContext
from opentelemetry import propagate

from cairn.events import Event, encode_event, stream_for, subject_for


class Outgoing:
    """An event to publish with the trace headers of the work that produced it. A plain class with slots: one is
    built per emitted event, and a frozen dataclass with a cached property costs twice as much."""

    __slots__ = ("_data", "event", "headers")

    def __init__(self, event: Event, headers: dict[str, str]) -> None:
        self.event, self.headers = event, headers
        self._data: bytes | None = None

    @property
    def data(self) -> bytes:
        """The event as published (and as a projection's outbox stores it): encoded once."""
        if self._data is None:
            self._data = encode_event(self.event)
        return self._data


@dataclass(frozen=True)
class Published:
    seq: int
    duplicate: bool


class EventPublisher:
    def __init__(self, js: JetStreamContext) -> None:
        self.js = js

    @staticmethod
    def trace_headers() -> dict[str, str]:
        headers: dict[str, str] = {}
        propagate.inject(headers)
        return headers

    def _headers(self, event: Event, msg_id: str | None) -> dict[str, str]:
        return {**self.trace_headers(), "Nats-Msg-Id": msg_id or event.event_id}

    async def publish(self, event: Event, msg_id: str | None = None) -> Published:
        """Publish and wait for JetStream's ack; the sequence is the write's `position`."""
        ack = await self.js.publish(
            subject_for(event),
            encode_event(event),
            stream=stream_for(event),
            headers=self._headers(event, msg_id),
        )
        return Published(int(ack.seq), bool(ack.duplicate))

    async def publish_many(
        self, events: Sequence[Event], msg_ids: Sequence[str | None] | None = None
    ) -> list[Published]:
        """Send all in order without waiting between them, then wait for every ack. They share one trace
        context (the caller's), so its headers are made once; each event gets its own dict (the client adds to it)."""
        ids = msg_ids if msg_ids is not None else [None] * len(events)
        trace = self.trace_headers()
        futures = [
            await self.js.publish_async(
                subject_for(e), encode_event(e), stream=stream_for(e), headers={**trace, "Nats-Msg-Id": i or e.event_id}
            )
            for e, i in zip(events, ids, strict=True)
        ]
        acks = await asyncio.gather(*futures)
        return [Published(int(a.seq), bool(a.duplicate)) for a in acks]

    async def publish_outgoing(self, outgoing: Sequence[Outgoing]) -> None:
        """Publish in order, each event with its own trace context, then wait for every ack."""
        futures = [
            await self.js.publish_async(
                subject_for(o.event), o.data, stream=stream_for(o.event),
                headers={**o.headers, "Nats-Msg-Id": o.event.event_id},
            )
            for o in outgoing
        ]  # fmt: skip
        await asyncio.gather(*futures)
