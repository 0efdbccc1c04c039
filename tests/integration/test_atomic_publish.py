"""The publisher's atomic batches against the real nats-server (with `sync_interval: always` each is fsynced once,
not once per message): several events for one stream land as one batch (the stored messages carry its id) at
consecutive positions, each reported; more than the server's limit is split in order; a batch JetStream refuses
(an id it already holds: a retry) stores nothing and is sent again message by message, which reports each
duplicate; concurrent single publishes are committed together and each caller gets its own answer; a connection
lost before the commit stores nothing, the caller's bound holds, and the retry stores every event once."""

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import nats.js.errors
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import StorageType, StreamConfig

from cairn.delivery import publisher as module
from cairn.delivery.acks import Acks
from cairn.delivery.publisher import (
    ATOMIC_BATCH_LIMIT,
    ATOMIC_BATCH_MIN,
    AckTimeout,
    EventPublisher,
    Published,
    acks_within,
)
from cairn.events import Event, InboundMessage, MessageReceived, encode_event

pytestmark = pytest.mark.integration

TENANT = "1525f314-6741-4c00-8d03-4047f54f310d"


@pytest.fixture
async def js(nats_client: Client) -> JetStreamContext:
    return nats_client.jetstream()


async def _stream(js: JetStreamContext, atomic: bool) -> tuple[str, str]:
    name, prefix = f"ATOMIC_{uuid.uuid4().hex[:8]}", f"atomic{uuid.uuid4().hex[:8]}"
    config = StreamConfig(name=name, subjects=[f"{prefix}.>"], storage=StorageType.MEMORY, duplicate_window=60)
    config.allow_atomic = atomic
    await js.add_stream(config)
    return name, prefix


@pytest.fixture
async def routed(js: JetStreamContext, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[str, str]]:
    """A stream of its own that takes atomic batches, as `cairn migrate` declares them; events go to
    `<prefix>.<first word of the text>` in it."""
    name, prefix = await _stream(js, atomic=True)

    def subject(event: Event) -> str:
        assert isinstance(event, MessageReceived)
        return f"{prefix}.{event.message.text.split()[0]}"

    monkeypatch.setattr(module, "subject_for", subject)
    monkeypatch.setattr(module, "stream_for", lambda event: name)
    try:
        yield name, prefix
    finally:
        await js.delete_stream(name)


def _event(text: str) -> MessageReceived:
    return MessageReceived(
        tenant_id=TENANT, agent_id="main", session_key="agent:main:main", message=InboundMessage(text=text)
    )


async def _stored(js: JetStreamContext, stream: str, published: list[Published]) -> list[Any]:
    return [await js.get_msg(stream, p.seq) for p in published]


def _batch_of(stored: Any) -> str | None:
    return (stored.headers or {}).get("Nats-Batch-Id")


async def test_events_for_one_stream_land_as_one_atomic_batch_each_at_its_own_consecutive_position(
    js: JetStreamContext, routed: tuple[str, str]
) -> None:
    name, _ = routed
    events = [_event(f"m{n}") for n in range(40)]
    published = await EventPublisher(js).publish_many(events)
    first = published[0].seq
    assert [(p.seq, p.duplicate) for p in published] == [(first + n, False) for n in range(40)]
    stored = await _stored(js, name, published)
    assert [m.data for m in stored] == [encode_event(e) for e in events]
    assert len({_batch_of(m) for m in stored} - {None}) == 1, "one batch, committed once"
    assert [m.headers["Nats-Batch-Sequence"] for m in stored] == [str(n) for n in range(1, 41)]
    assert [m.headers["Nats-Msg-Id"] for m in stored] == [e.event_id for e in events]


async def test_fewer_events_than_an_atomic_batch_saves_fsyncs_for_go_one_message_at_a_time(
    js: JetStreamContext, routed: tuple[str, str]
) -> None:
    """An atomic batch costs the server four fsyncs whatever its size: for fewer messages, one each is less."""
    name, _ = routed
    events = [_event(f"m{n}") for n in range(ATOMIC_BATCH_MIN - 1)]
    published = await EventPublisher(js).publish_many(events)
    stored = await _stored(js, name, published)
    assert [m.data for m in stored] == [encode_event(e) for e in events]
    assert {_batch_of(m) for m in stored} == {None}


async def test_interleaved_concurrent_batches_each_hold_consecutive_positions(
    js: JetStreamContext, routed: tuple[str, str]
) -> None:
    """Positions are derived from the commit's ack (last sequence and count): that holds because the server
    stores a batch whole, however the frames of concurrent batches arrive."""
    name, _ = routed
    publisher = EventPublisher(js)
    batches = [[_event(f"b{b}m{n}") for n in range(25)] for b in range(8)]
    results = await asyncio.gather(*(publisher.publish_many(batch) for batch in batches))
    for batch, published in zip(batches, results, strict=True):
        assert [p.seq for p in published] == list(range(published[0].seq, published[0].seq + 25))
        stored = await _stored(js, name, published)
        assert [m.data for m in stored] == [encode_event(e) for e in batch]
        assert len({_batch_of(m) for m in stored}) == 1
    assert (await js.stream_info(name)).state.messages == 200


async def test_more_events_than_the_servers_batch_limit_go_as_several_batches_in_order(
    js: JetStreamContext, routed: tuple[str, str]
) -> None:
    name, _ = routed
    count = 2 * ATOMIC_BATCH_LIMIT + 150
    events = [_event(f"m{n}") for n in range(count)]
    published = await EventPublisher(js).publish_many(events)
    assert [p.seq for p in published] == list(range(published[0].seq, published[0].seq + count))
    stored = await _stored(js, name, published)
    assert [m.data for m in stored] == [encode_event(e) for e in events]
    batches = [_batch_of(m) for m in stored]
    assert None not in batches
    sizes = [batches.count(batch) for batch in dict.fromkeys(batches)]
    assert sizes == [ATOMIC_BATCH_LIMIT, ATOMIC_BATCH_LIMIT, 150]


async def test_a_batch_holding_an_id_already_stored_stores_nothing_twice_and_reports_each_duplicate(
    js: JetStreamContext, routed: tuple[str, str]
) -> None:
    """JetStream refuses the whole atomic batch (err 10201); the publisher sends it again message by message."""
    name, _ = routed
    publisher = EventPublisher(js)
    events = [_event(f"m{n}") for n in range(4)]
    first = await publisher.publish_many(events)
    fresh = [_event("new1"), _event("new2")]
    again = await publisher.publish_many([events[2], fresh[0], events[0], fresh[1], fresh[1]])
    assert [(p.seq, p.duplicate) for p in again] == [
        (first[2].seq, True),
        (first[3].seq + 1, False),
        (first[0].seq, True),
        (first[3].seq + 2, False),
        (first[3].seq + 2, True),  # twice in one request: kept once
    ]
    assert (await js.stream_info(name)).state.messages == 6
    assert [m.data for m in await _stored(js, name, again[1::2])] == [encode_event(e) for e in fresh]


async def test_a_stream_without_atomic_batches_is_published_message_by_message(
    js: JetStreamContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream declared before `allow_atomic` (until `cairn migrate` runs) refuses atomic batches (10174): the
    events are stored one by one all the same, and the publisher stops asking for a while."""
    name, prefix = await _stream(js, atomic=False)
    monkeypatch.setattr(module, "subject_for", lambda event: f"{prefix}.x")
    monkeypatch.setattr(module, "stream_for", lambda event: name)
    try:
        publisher = EventPublisher(js)
        events = [_event(f"m{n}") for n in range(10)]
        published = await publisher.publish_many(events)
        stored = await _stored(js, name, published)
        assert [m.data for m in stored] == [encode_event(e) for e in events]
        assert {_batch_of(m) for m in stored} == {None}
        assert name in publisher._atomic_refused
    finally:
        await js.delete_stream(name)


async def test_concurrent_single_publishes_are_committed_together_and_each_caller_gets_its_own_answer(
    js: JetStreamContext, routed: tuple[str, str]
) -> None:
    name, _ = routed
    publisher = EventPublisher(js)
    alone = await publisher.publish(_event("idle"))
    assert _batch_of(await js.get_msg(name, alone.seq)) is None, "nothing in flight: sent at once, on its own"

    events = [_event(f"c{n}") for n in range(300)]
    answers = await asyncio.gather(*(publisher.publish(event) for event in events))
    stored = await _stored(js, name, answers)
    assert [m.data for m in stored] == [encode_event(e) for e in events], "each caller got its own position"
    assert not any(a.duplicate for a in answers)
    batches = {_batch_of(m) for m in stored}
    assert None not in batches
    assert len(batches) < 10, "gathered into a few atomic batches, not 300 publishes"
    assert (await js.stream_info(name)).state.messages == 301


async def test_a_duplicate_or_an_error_in_a_group_commit_is_answered_to_its_own_caller_only(
    js: JetStreamContext, routed: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name, prefix = routed
    publisher = EventPublisher(js)
    retried = _event("kept")
    kept = await publisher.publish(retried)

    def lost_or_routed(event: Event) -> str:
        assert isinstance(event, MessageReceived)
        return "nostream.x" if event.message.text == "lost" else f"{prefix}.{event.message.text}"

    monkeypatch.setattr(module, "subject_for", lost_or_routed)
    fresh = [_event(f"f{n}") for n in range(20)]
    answers = await asyncio.gather(
        *(publisher.publish(e) for e in fresh[:10]),
        publisher.publish(retried),
        publisher.publish(_event("lost")),
        *(publisher.publish(e) for e in fresh[10:]),
        return_exceptions=True,
    )
    assert answers[10] == Published(kept.seq, True)
    assert isinstance(answers[11], nats.js.errors.NoStreamResponseError)
    published = [a for a in answers[:10] + answers[12:] if isinstance(a, Published)]
    assert len(published) == 20
    assert [m.data for m in await _stored(js, name, published)] == [encode_event(e) for e in fresh]
    assert (await js.stream_info(name)).state.messages == 21


async def test_a_connection_lost_before_the_commit_stores_nothing_and_the_retry_stores_each_event_once(
    nats_client: Client, js: JetStreamContext, routed: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first half of the batch reaches the server, then the connection goes: the commit is never sent. The
    server stores none of it; the caller's bound answers AckTimeout; the same events published again (as a client
    retries) are each stored once."""
    name, _ = routed
    publisher = EventPublisher(js)
    events = [_event(f"m{n}") for n in range(30)]
    send = Acks.send
    reconnected = asyncio.Event()
    nats_client._reconnected_cb = _set(reconnected)

    async def cut(acks: Acks, frames: list[bytes], payload_bytes: int) -> None:
        await send(acks, frames[:15], payload_bytes)
        await nats_client.flush(timeout=5)  # the first half is at the server
        transport: Any = nats_client._transport
        transport.close()

    monkeypatch.setattr(Acks, "send", cut)
    with acks_within(1.0), pytest.raises(AckTimeout):
        await publisher.publish_many(events)
    monkeypatch.setattr(Acks, "send", send)
    await asyncio.wait_for(reconnected.wait(), 10)
    assert (await js.stream_info(name)).state.messages == 0, "an uncommitted batch is not stored"
    published = await asyncio.wait_for(publisher.publish_many(events), 10)
    assert not any(p.duplicate for p in published)
    assert [m.data for m in await _stored(js, name, published)] == [encode_event(e) for e in events]
    assert (await js.stream_info(name)).state.messages == 30


def _set(event: asyncio.Event) -> Callable[[], Awaitable[None]]:
    async def callback() -> None:
        event.set()

    return callback
