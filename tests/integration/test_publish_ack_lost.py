"""A publish whose acks never come is given up after `ack_lost_s`, even with no caller bound (`acks_within`): frames
written just before nats-server dies are never answered by the restarted server, and a consumer waiting for them
for ever held its batch (and its partition) until someone restarted the service, found by `make chaos` after a
NATS kill -9. The AckTimeout is transient, so the consumer sends again and JetStream deduplicates.

The server here takes every publish and answers none: a real nats-server with JetStream and no stream, where a
plain subscriber swallows the events' subjects (as a server that died with them in flight looks to the client)."""

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from cairn.delivery.publisher import ATOMIC_BATCH_MIN, AckTimeout, EventPublisher, Outgoing
from cairn.events import InboundMessage, MessageReceived
from cairn.local.infra import start_nats
from cairn.local.processes import free_port, stop_pid

pytestmark = pytest.mark.integration

TENANT = "1525f314-6741-4c00-8d03-4047f54f310d"
LOST_S = 0.5


@pytest.fixture
async def swallowing_server() -> AsyncIterator[tuple[Client, list[Msg]]]:
    with tempfile.TemporaryDirectory(prefix="cairn-swallow-") as home:
        port = free_port()
        pid = start_nats(Path(home), port, free_port())
        nc = await nats.connect(f"nats://127.0.0.1:{port}")
        taken: list[Msg] = []

        async def swallow(msg: Msg) -> None:
            taken.append(msg)

        await nc.subscribe("cairn.>", cb=swallow)
        try:
            yield nc, taken
        finally:
            await nc.close()
            stop_pid(pid)


def _events(count: int) -> list[Outgoing]:
    return [
        Outgoing(
            MessageReceived(
                tenant_id=TENANT,
                agent_id="main",
                session_key="agent:main:main",
                message=InboundMessage(channel="test", peer_id="p1", text=f"lost {n}", message_id=f"lost-{n}"),
            ),
            {},
        )
        for n in range(count)
    ]


@pytest.mark.parametrize("count", [1, ATOMIC_BATCH_MIN + 1], ids=["one message", "an atomic batch"])
async def test_a_publish_never_acknowledged_fails_at_the_bound_instead_of_waiting_for_ever(
    swallowing_server: tuple[Client, list[Msg]], count: int
) -> None:
    nc, taken = swallowing_server
    publisher = EventPublisher(nc.jetstream(), ack_lost_s=LOST_S)
    sending = asyncio.ensure_future(publisher.publish_outgoing(_events(count)))  # no `acks_within`: a consumer's way

    done, _ = await asyncio.wait({sending}, timeout=10 * LOST_S)

    assert sending in done, "the publish still waits for acks that will never come"
    with pytest.raises(AckTimeout):
        sending.result()
    assert len(taken) >= count, "the frames never reached the server: the test would not cover the wait"
