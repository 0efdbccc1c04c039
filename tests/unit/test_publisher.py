"""`EventPublisher.publish_many` sends every event with the caller's trace context and its own dedup id, in order;
an `Outgoing` event is encoded once."""

import asyncio
import uuid
from dataclasses import dataclass

import pytest
from opentelemetry import context, propagate

from cairn.events import Event, InboundMessage, IndexAdvanced, MessageReceived, encode_event
from cairn.platform import publisher
from cairn.platform.publisher import EventPublisher, Outgoing

TENANT = "1525f314-6741-4c00-8d03-4047f54f310d"
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@dataclass
class Ack:
    seq: int
    duplicate: bool = False


class FakeJetStream:
    """Records what is published; like nats-py, it adds the expected stream to the headers it is given."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, dict[str, str]]] = []

    async def publish_async(
        self, subject: str, payload: bytes, stream: str | None = None, headers: dict[str, str] | None = None
    ) -> "asyncio.Future[Ack]":
        assert headers is not None
        assert stream is not None
        self.sent.append((subject, payload, dict(headers)))
        headers["Nats-Expected-Stream"] = stream
        future: asyncio.Future[Ack] = asyncio.get_running_loop().create_future()
        future.set_result(Ack(len(self.sent)))
        return future


def _event(text: str) -> MessageReceived:
    message = InboundMessage(text=text)
    return MessageReceived(tenant_id=TENANT, agent_id="main", session_key="agent:main:main", message=message)


async def test_each_event_carries_the_callers_trace_context_and_its_own_id() -> None:
    js = FakeJetStream()
    publisher = EventPublisher(js)  # type: ignore[arg-type]
    events = [_event("one"), _event("two"), _event("three")]
    carrier = {"traceparent": PARENT, "tracestate": "vendor=abc", "baggage": "tenant=t1"}
    token = context.attach(propagate.extract(carrier))
    try:
        published = await publisher.publish_many(events, ["dedup-1", None, "dedup-3"])
    finally:
        context.detach(token)
    assert [p.seq for p in published] == [1, 2, 3]
    assert [headers for _, _, headers in js.sent] == [
        {**carrier, "Nats-Msg-Id": "dedup-1"},
        {**carrier, "Nats-Msg-Id": events[1].event_id},
        {**carrier, "Nats-Msg-Id": "dedup-3"},
    ]
    assert [MessageReceived.model_validate_json(data).message.text for _, data, _ in js.sent] == ["one", "two", "three"]
    # without a trace context, only the ids
    await publisher.publish_many(events[:1])
    assert js.sent[-1][2] == {"Nats-Msg-Id": events[0].event_id}


def test_an_outgoing_event_is_encoded_once_however_often_its_bytes_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """The outbox stores the bytes and the publisher sends them; built per emitted event, it keeps no `__dict__`."""
    event = IndexAdvanced(tenant_id=str(uuid.uuid4()), ingest_seq=3)
    encoded: list[Event] = []

    def encode(e: Event) -> bytes:
        encoded.append(e)
        return encode_event(e)

    monkeypatch.setattr(publisher, "encode_event", encode)
    outgoing = Outgoing(event, {"traceparent": "00-1-2-01"})
    assert outgoing.data == outgoing.data == encode_event(event)
    assert encoded == [event]
    assert (outgoing.event, outgoing.headers) == (event, {"traceparent": "00-1-2-01"})
    assert not hasattr(outgoing, "__dict__")
