"""`cairn bench consumer`: what draining a JetStream stream costs per message through nats-py's own pull
consumer, through FastStream's pull subscriber (one handler call per message, and its batch mode) and through
cairn's `PullConsumer` — the numbers behind the README's note on why the services run their own pull loop.

Each round publishes the same small JSON events to a scratch stream and times one drain of them, from the first
fetch to the last ack; the three ways alternate round by round, so a noisy machine slows them alike, and each is
reported as a ratio to nats-py in the same run. Handlers decode the JSON and do nothing else: the figure is the
consumer's own cost, not a projection's.
"""

import asyncio
import json
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import nats
from faststream import FastStream
from faststream.nats import JStream, NatsBroker, PullSub
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, StreamConfig

from cairn.delivery.pull import PullConsumer
from cairn.delivery.settings import NatsSettings

FETCH = 256
Drain = Callable[[str, str, str, int], Awaitable[float]]


@dataclass(frozen=True)
class ConsumerFigure:
    way: str
    msg_per_s: float
    us_per_msg: float
    ratio_to_nats_py: float


async def drain_nats_py(url: str, stream: str, subject: str, count: int) -> float:
    nc = await nats.connect(url, name="cairn-bench-consumer")
    try:
        subscription = await nc.jetstream().pull_subscribe(
            subject, durable=f"raw{uuid.uuid4().hex[:8]}", stream=stream, config=ConsumerConfig(ack_wait=60)
        )
        start, seen = time.perf_counter(), 0
        while seen < count:
            try:
                messages = await subscription.fetch(FETCH, timeout=1.0)
            except TimeoutError:
                continue
            for message in messages:
                json.loads(message.data)
                await message.ack()
            seen += len(messages)
        return time.perf_counter() - start
    finally:
        await nc.close()


async def _drain_faststream(url: str, stream: str, subject: str, count: int, batch: bool) -> float:
    broker = NatsBroker(url, logger=None)
    done, seen = asyncio.Event(), 0

    def saw(n: int) -> None:
        nonlocal seen
        seen += n
        if seen >= count:
            done.set()

    pull = PullSub(batch_size=FETCH, timeout=1.0, batch=batch)
    where: dict[str, Any] = {"stream": JStream(stream, declare=False), "durable": f"fs{uuid.uuid4().hex[:8]}"}

    async def handle_batch(bodies: list[dict[str, Any]]) -> None:
        saw(len(bodies))

    async def handle_one(body: dict[str, Any]) -> None:
        saw(1)

    broker.subscriber(subject, pull_sub=pull, **where)(handle_batch if batch else handle_one)
    app = FastStream(broker, logger=None)
    start = time.perf_counter()
    async with broker:
        await app.start()
        await done.wait()
        elapsed = time.perf_counter() - start
        await app.stop()
    return elapsed


async def drain_faststream_each(url: str, stream: str, subject: str, count: int) -> float:
    return await _drain_faststream(url, stream, subject, count, batch=False)


async def drain_faststream_batch(url: str, stream: str, subject: str, count: int) -> float:
    return await _drain_faststream(url, stream, subject, count, batch=True)


class _Counting(PullConsumer):
    """cairn's pull loop (fetch, in-order batches, dead letters) with a batch that is decoded, acked and
    applied nowhere."""

    def __init__(self, js: JetStreamContext, stream: str, count: int) -> None:
        super().__init__(f"cairn{uuid.uuid4().hex[:8]}", stream, js, NatsSettings(fetch_batch=FETCH, ack_wait_s=60))
        self.count, self.seen, self.done = count, 0, asyncio.Event()

    async def process_batch(self, messages: Sequence[Msg]) -> None:
        for message in messages:
            json.loads(message.data)
            await message.ack()
        self.seen += len(messages)
        if self.seen >= self.count:
            self.done.set()


async def drain_cairn(url: str, stream: str, subject: str, count: int) -> float:
    nc: Client = await nats.connect(url, name="cairn-bench-consumer")
    consumer = _Counting(nc.jetstream(), stream, count)
    start = time.perf_counter()
    running = asyncio.create_task(consumer.run())
    try:
        await consumer.done.wait()
        return time.perf_counter() - start
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await nc.close()


WAYS: dict[str, Drain] = {
    "nats-py pull, fetch 256": drain_nats_py,
    "cairn PullConsumer, fetch 256": drain_cairn,
    "FastStream pull_sub, per message": drain_faststream_each,
    "FastStream pull_sub, batch": drain_faststream_batch,
}


async def _publish(url: str, stream: str, subject: str, count: int) -> None:
    nc = await nats.connect(url, name="cairn-bench-consumer")
    try:
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name=stream, subjects=[subject]))
        body = {"tenant_id": str(uuid.uuid4()), "session_key": "agent:main:main", "role": "user"}
        pending = [await js.publish_async(subject, json.dumps({**body, "i": i}).encode()) for i in range(count)]
        await asyncio.gather(*pending)
    finally:
        await nc.close()


async def _drop(url: str, stream: str) -> None:
    nc = await nats.connect(url, name="cairn-bench-consumer")
    try:
        await nc.jetstream().delete_stream(stream)
    finally:
        await nc.close()


async def run_consumer_bench(url: str, messages: int, rounds: int) -> list[ConsumerFigure]:
    """Seconds per drain of `messages`, each way once per round in turn; the median of each is reported."""
    seconds: dict[str, list[float]] = {way: [] for way in WAYS}
    for _ in range(rounds):
        for way, drain in WAYS.items():
            run = uuid.uuid4().hex[:8]
            stream, subject = f"BENCH_CONSUMER_{run}", f"bench.consumer.{run}"
            await _publish(url, stream, subject, messages)
            try:
                seconds[way].append(await drain(url, stream, subject, messages))
            finally:
                await _drop(url, stream)
    base = statistics.median(seconds["nats-py pull, fetch 256"])
    return [
        ConsumerFigure(way, round(messages / median, 1), round(median / messages * 1e6, 1), round(base / median, 3))
        for way, median in ((way, statistics.median(times)) for way, times in seconds.items())
    ]
