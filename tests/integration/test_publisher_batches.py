"""`EventPublisher.publish_many` / `publish_outgoing` against the real nats-server: a batch is written as one buffer
of HPUB frames whose acks come back to one wildcard inbox; every publish is reported with its own JetStream ack
(sequence, duplicate), carries its dedup id and trace headers, fails as JetStream answers (no stream, wrong
stream), and acks keep coming after the client reconnects. Each test runs against a stream that takes atomic
batches (what `cairn migrate` declares) and one that does not (a stream from before it): the answers are the same.
(The atomic path itself: tests/integration/test_atomic_publish.py.)"""

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import nats.errors
import nats.js.errors
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import StorageType, StreamConfig
from opentelemetry import context, propagate

from cairn.delivery import publisher as module
from cairn.delivery.nats import connect
from cairn.delivery.publisher import EventPublisher, Outgoing
from cairn.events import Event, InboundMessage, MessageReceived, encode_event
from cairn.local import LocalStack

TENANT = "1525f314-6741-4c00-8d03-4047f54f310d"
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
async def js(nats_client: Client) -> JetStreamContext:
    return nats_client.jetstream()


@pytest.fixture(params=[True, False], ids=["atomic", "per-message"])
async def stream(js: JetStreamContext, request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, str]]:
    """A stream of its own (name, subject prefix) with a dedup window, taking atomic batches or not; deleted after."""
    name, prefix = f"PUBTEST_{uuid.uuid4().hex[:8]}", f"pubtest{uuid.uuid4().hex[:8]}"
    config = StreamConfig(name=name, subjects=[f"{prefix}.>"], storage=StorageType.MEMORY, duplicate_window=60)
    config.allow_atomic = request.param
    await js.add_stream(config)
    try:
        yield name, prefix
    finally:
        await js.delete_stream(name)


@pytest.fixture
def routed(monkeypatch: pytest.MonkeyPatch, stream: tuple[str, str]) -> tuple[str, str]:
    """Events go to the test's stream: `<prefix>.<text>` (the text picks the subject)."""
    name, prefix = stream

    def subject(event: Event) -> str:
        assert isinstance(event, MessageReceived)
        return f"{prefix}.{event.message.text.split()[0]}"

    monkeypatch.setattr(module, "subject_for", subject)
    monkeypatch.setattr(module, "stream_for", lambda event: name)
    return stream


def _event(text: str) -> MessageReceived:
    return MessageReceived(
        tenant_id=TENANT, agent_id="main", session_key="agent:main:main", message=InboundMessage(text=text)
    )


async def test_each_publish_is_reported_with_its_own_ack_and_stored_with_its_id_and_trace(
    js: JetStreamContext, routed: tuple[str, str]
) -> None:
    name, prefix = routed
    publisher = EventPublisher(js)
    events = [_event(f"m{n} text") for n in range(50)]
    ids: list[str | None] = [f"dedup-{n}" if n % 2 else None for n in range(50)]
    carrier = {"traceparent": PARENT, "tracestate": "vendor=abc"}
    token = context.attach(propagate.extract(carrier))
    try:
        published = await publisher.publish_many(events, ids)
    finally:
        context.detach(token)
    first = published[0].seq
    assert [(p.seq, p.duplicate) for p in published] == [(first + n, False) for n in range(50)]
    for n, (event, p) in enumerate(zip(events, published, strict=True)):
        stored = await js.get_msg(name, p.seq)
        assert stored.subject == f"{prefix}.m{n}"
        assert stored.data == encode_event(event)
        assert stored.headers is not None
        assert stored.headers["Nats-Msg-Id"] == (ids[n] or event.event_id)
        assert stored.headers["traceparent"] == PARENT
        assert stored.headers["tracestate"] == "vendor=abc"


async def test_a_republished_id_is_deduplicated_and_answered_with_the_stored_sequence(
    js: JetStreamContext, routed: tuple[str, str]
) -> None:
    name, _ = routed
    publisher = EventPublisher(js)
    events = [_event(f"m{n}") for n in range(5)]
    first = await publisher.publish_many(events)
    again = await publisher.publish_many([events[3], _event("new"), events[1]])
    assert [(p.seq, p.duplicate) for p in again] == [
        (first[3].seq, True),
        (first[4].seq + 1, False),
        (first[1].seq, True),
    ]
    assert (await js.stream_info(name)).state.messages == 6


async def test_outgoing_events_keep_their_own_trace_headers_and_ids(
    js: JetStreamContext, routed: tuple[str, str]
) -> None:
    name, _ = routed
    publisher = EventPublisher(js)
    shared = {"traceparent": PARENT}
    other = {"traceparent": "00-1af7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01", "baggage": "a=1"}
    outgoing = [Outgoing(_event("a"), shared), Outgoing(_event("b"), other), Outgoing(_event("c"), shared)]
    await publisher.publish_outgoing(outgoing)
    await publisher.publish_outgoing(outgoing)  # a re-publish of an outbox: deduplicated
    info = await js.stream_info(name)
    assert info.state.messages == 3
    for seq, o in zip(range(info.state.first_seq, info.state.first_seq + 3), outgoing, strict=True):
        stored = await js.get_msg(name, seq)
        assert stored.data == o.data
        own = {key: value for key, value in (stored.headers or {}).items() if not key.startswith("Nats-Batch-")}
        assert own == {**o.headers, "Nats-Msg-Id": o.event.event_id, "Nats-Expected-Stream": name}


async def test_a_subject_no_stream_takes_fails_with_no_stream_response(
    js: JetStreamContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(module, "subject_for", lambda event: f"nostream{uuid.uuid4().hex[:8]}.x")
    with pytest.raises(nats.js.errors.NoStreamResponseError):
        await asyncio.wait_for(EventPublisher(js).publish_many([_event("lost")]), 10)


async def test_the_wrong_expected_stream_fails_with_jetstreams_error(
    js: JetStreamContext, routed: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name, _ = routed
    publisher = EventPublisher(js)
    monkeypatch.setattr(module, "stream_for", lambda event: "NOT_" + name)
    with pytest.raises(nats.js.errors.APIError) as raised:
        await asyncio.wait_for(publisher.publish_outgoing([Outgoing(_event("a"), {})]), 10)
    assert raised.value.err_code == 10060  # expected stream does not match
    assert (await js.stream_info(name)).state.messages == 0


async def test_concurrent_batches_each_get_the_acks_of_their_own_messages(
    js: JetStreamContext, routed: tuple[str, str]
) -> None:
    name, _ = routed
    publisher = EventPublisher(js)
    batches = [[_event(f"b{b}m{n}") for n in range(30)] for b in range(8)]
    results = await asyncio.gather(*(publisher.publish_many(batch) for batch in batches))
    for batch, published in zip(batches, results, strict=True):
        for event, p in zip(batch, published, strict=True):
            assert (await js.get_msg(name, p.seq)).data == encode_event(event)
    assert len({p.seq for published in results for p in published}) == 240


async def test_acks_keep_coming_after_the_client_reconnects(
    nats_client: Client, js: JetStreamContext, routed: tuple[str, str]
) -> None:
    name, prefix = routed
    publisher = EventPublisher(js)
    await publisher.publish_many([_event("before")])
    reconnected = asyncio.Event()
    nats_client._reconnected_cb = _set(reconnected)
    transport: Any = nats_client._transport
    transport.close()  # the connection goes away under the client: it reconnects and resubscribes
    await asyncio.wait_for(reconnected.wait(), 10)
    published = await asyncio.wait_for(publisher.publish_many([_event("after"), _event("again")]), 10)
    assert [(await js.get_msg(name, p.seq)).subject for p in published] == [f"{prefix}.after", f"{prefix}.again"]


def _set(event: asyncio.Event) -> Callable[[], Awaitable[None]]:
    async def callback() -> None:
        event.set()

    return callback


async def test_a_closed_connection_refuses_to_publish(stack: LocalStack, routed: tuple[str, str]) -> None:
    nc = await connect(stack.nats_url, "closed-test")
    publisher = EventPublisher(nc.jetstream())
    await publisher.publish_many([_event("open")])
    await nc.close()
    with pytest.raises(nats.errors.ConnectionClosedError):
        await publisher.publish_many([_event("closed")])


async def test_a_cancelled_publish_leaves_nothing_waiting(js: JetStreamContext, routed: tuple[str, str]) -> None:
    publisher = EventPublisher(js)
    task = asyncio.ensure_future(publisher.publish_many([_event(f"m{n}") for n in range(20)]))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert publisher._acks._waiting == {}
    assert len(await publisher.publish_many([_event("next")])) == 1
