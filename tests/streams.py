"""Reading what a JetStream stream holds, for assertions: by subject, in order, without a consumer."""

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, RawStreamMsg, RetentionPolicy


async def stream_messages(js: JetStreamContext, stream: str, subject: str) -> list[RawStreamMsg]:
    """Every message stored on `subject`, in order."""
    found: list[RawStreamMsg] = []
    seq = 1
    while True:
        try:
            msg = await js.get_msg(stream, seq=seq, subject=subject, next=True)
        except nats.js.errors.NotFoundError:
            return found
        found.append(msg)
        seq = (msg.seq or seq) + 1


async def every_stream_message(js: JetStreamContext) -> dict[str, list[bytes]]:
    """Each stream's stored messages (headers and body together, as bytes), for proving what was never
    written: read with a throwaway consumer, or one by one where a work queue allows no second consumer."""
    found: dict[str, list[bytes]] = {}
    for info in await js.streams_info():
        name = info.config.name or ""
        if info.config.retention == RetentionPolicy.WORK_QUEUE:
            messages = await _one_by_one(js, name, info.state.first_seq, info.state.last_seq)
            found[name] = [_flat(m.headers, m.data) for m in messages]
        else:
            found[name] = await _with_a_consumer(js, name, info.state.messages)
    return found


def _flat(headers: dict[str, str] | None, data: bytes | None) -> bytes:
    return repr(headers or {}).encode() + b"\n" + (data or b"")


async def _one_by_one(js: JetStreamContext, stream: str, first: int, last: int) -> list[RawStreamMsg]:
    found: list[RawStreamMsg] = []
    for seq in range(max(first, 1), last + 1):
        try:
            found.append(await js.get_msg(stream, seq=seq))
        except nats.js.errors.NotFoundError:
            continue  # acked off the work queue meanwhile
    return found


async def _with_a_consumer(js: JetStreamContext, stream: str, count: int) -> list[bytes]:
    if count == 0:
        return []
    config = ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL, inactive_threshold=30.0)
    subscription = await js.pull_subscribe("", stream=stream, config=config)
    found: list[bytes] = []
    try:
        while len(found) < count:
            try:
                batch = await subscription.fetch(1000, timeout=2.0)
            except nats.errors.TimeoutError:
                break  # messages may have aged out meanwhile; what is there has been read
            found += [_flat(m.headers, m.data) for m in batch]
    finally:
        await subscription.unsubscribe()
    return found
