"""Answering a retry reads what its first publish stored (`EventPublisher.stored`): within the caller's
`acks_within` bound like the publish itself, so a duplicate's answer never waits on NATS for nats-py's own 5 s."""

import asyncio
import uuid

import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from cairn.delivery.publisher import AckTimeout, EventPublisher, acks_within
from cairn.events import INGEST_STREAM

pytestmark = pytest.mark.integration


async def test_a_stored_event_is_read_back_by_its_sequence(nats_client: Client) -> None:
    js = nats_client.jetstream()
    subject, stream = f"cairn-stored-test.{uuid.uuid4().hex}", f"STORED_{uuid.uuid4().hex[:8]}"
    await js.add_stream(name=stream, subjects=[subject])
    try:
        ack = await js.publish(subject, b"first")
        with acks_within(2):
            assert await EventPublisher(js).stored(ack.stream, ack.seq) == b"first"
    finally:
        await js.delete_stream(stream)


async def test_reading_a_stored_event_is_bounded_by_the_callers_publish_bound(nats_client: Client) -> None:
    """A JetStream API that takes the request and never answers (what a stalled server looks like to a client):
    the read gives up at the caller's bound with AckTimeout, which the HTTP edge answers 503, not after 5 s."""
    prefix = f"$STALLED{uuid.uuid4().hex[:8]}.API"
    taken: list[Msg] = []

    async def swallow(msg: Msg) -> None:
        taken.append(msg)

    subscription = await nats_client.subscribe(f"{prefix}.>", cb=swallow)
    try:
        publisher = EventPublisher(nats_client.jetstream(prefix=prefix))
        read = asyncio.ensure_future(_stored_within(publisher, 0.3))
        done, _ = await asyncio.wait({read}, timeout=3)  # well under nats-py's 5 s
        assert read in done, "the read waited past its bound"
        with pytest.raises(AckTimeout):
            read.result()
        assert taken, "the request never reached the stalled API: the test would not cover the wait"
    finally:
        await subscription.unsubscribe()


async def _stored_within(publisher: EventPublisher, seconds: float) -> bytes:
    with acks_within(seconds):
        return await publisher.stored(INGEST_STREAM, 1)
