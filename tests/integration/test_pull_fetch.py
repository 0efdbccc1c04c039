"""`cairn.delivery.pull.fetch` against the real nats-server: the batch it returns, in stream order, ending
when the server ends the pull request; what an earlier request left in the subscription's queue; stale
status messages; the subscription's pending accounting; and a closed connection ending a wait."""

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import nats.errors
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig

from cairn.delivery.nats import connect
from cairn.delivery.pull import Delivery, fetch
from cairn.local import LocalStack

pytestmark = pytest.mark.integration

Pull = tuple[JetStreamContext, str, JetStreamContext.PullSubscription]
LONG = 60.0  # a fetch that returns did not wait for its timeout: each call is bounded well below it


@pytest.fixture
async def pull(nats_client: Client) -> AsyncIterator[Pull]:
    """A stream and durable pull consumer of the test's own; yields the subject to publish on."""
    js = nats_client.jetstream()
    name = f"fetchtest{uuid.uuid4().hex[:8]}"
    await js.add_stream(name=name, subjects=[f"{name}.>"])
    await js.add_consumer(name, ConsumerConfig(durable_name=name, ack_policy=AckPolicy.EXPLICIT, ack_wait=30))
    subscription = await js.pull_subscribe_bind(durable=name, stream=name)
    try:
        yield js, f"{name}.x", subscription
    finally:
        await subscription.unsubscribe()
        await js.delete_stream(name)


async def publish(js: JetStreamContext, subject: str, count: int, first: int = 0) -> None:
    for n in range(first, first + count):
        await js.publish(subject, str(n).encode())


async def fetched(subscription: JetStreamContext.PullSubscription, batch: int) -> list[int]:
    messages = await asyncio.wait_for(fetch(subscription, batch, LONG), timeout=LONG / 2)
    for message in messages:
        await message.ack()
    return [int(m.data) for m in messages]


async def test_a_fetch_returns_at_most_a_batch_in_stream_order_and_the_rest_comes_next(pull: Pull) -> None:
    js, subject, subscription = pull
    await publish(js, subject, 10)
    assert await fetched(subscription, 4) == [0, 1, 2, 3]
    assert await fetched(subscription, 4) == [4, 5, 6, 7]
    # fewer than the batch: the server ends the request when it has no more, the fetch does not wait it out
    assert await fetched(subscription, 4) == [8, 9]
    assert subscription.pending_msgs == 0
    assert subscription.pending_bytes == 0


async def test_a_fetch_on_nothing_waits_for_the_first_message(pull: Pull) -> None:
    js, subject, subscription = pull
    waiting = asyncio.create_task(fetched(subscription, 8))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await publish(js, subject, 3)
    got = await waiting
    assert got[0] == 0  # the rest may come with it or with the next fetch, never lost
    while len(got) < 3:
        got += await fetched(subscription, 8)
    assert got == [0, 1, 2]


async def test_a_fetch_on_nothing_times_out_after_the_server_ends_its_request(pull: Pull) -> None:
    js, subject, subscription = pull
    with pytest.raises(nats.errors.TimeoutError):
        await fetch(subscription, 8, 0.3)
    # the server's 408 was read by that fetch, so nothing stale is left and the next request is answered
    assert subscription.pending_msgs == 0
    await publish(js, subject, 2)
    assert await fetched(subscription, 8) == [0, 1]


async def test_messages_of_an_earlier_request_are_taken_first_and_stale_statuses_dropped(pull: Pull) -> None:
    js, subject, subscription = pull
    nc = subscription._nc
    # a request nobody waits for any more, which expires (its 408 lands in the queue) ...
    expiring = {"batch": 5, "expires": 100_000_000}
    await nc.publish(subscription._nms, json.dumps(expiring).encode(), subscription._deliver)
    await asyncio.sleep(0.5)
    # ... and one that is answered after its caller stopped waiting
    await nc.publish(subscription._nms, json.dumps({"batch": 3}).encode(), subscription._deliver)
    await publish(js, subject, 5)
    await nc.flush()
    for _ in range(100):
        if subscription.pending_msgs >= 4:
            break
        await asyncio.sleep(0.05)
    assert subscription.pending_msgs == 4  # the 408, then three messages
    assert await fetched(subscription, 8) == [0, 1, 2]  # no new request needed for these
    assert await fetched(subscription, 8) == [3, 4]
    assert subscription.pending_bytes == 0


async def test_delivery_of_fetched_messages(pull: Pull) -> None:
    js, subject, subscription = pull
    await publish(js, subject, 2)
    messages = await fetch(subscription, 2, LONG)
    assert [(Delivery.of(m).stream_seq, Delivery.of(m).num_delivered, m.subject) for m in messages] == [
        (1, 1, subject),
        (2, 1, subject),
    ]


async def test_closing_the_connection_ends_a_waiting_fetch(stack: LocalStack) -> None:
    nc = await connect(stack.nats_url, "cairn-fetch-close-test")
    js = nc.jetstream()
    name = f"fetchclose{uuid.uuid4().hex[:8]}"
    await js.add_stream(name=name, subjects=[f"{name}.>"])
    try:
        subscription = await js.pull_subscribe(f"{name}.x", durable=name, stream=name)
        waiting = asyncio.create_task(fetch(subscription, 8, LONG))
        await asyncio.sleep(0.3)
        await nc.close()
        with pytest.raises(nats.errors.ConnectionClosedError):
            await asyncio.wait_for(waiting, timeout=LONG / 2)
    finally:
        admin = await connect(stack.nats_url, "cairn-fetch-close-admin")
        await admin.jetstream().delete_stream(name)
        await admin.close()
