"""Reading what a JetStream stream holds, for assertions: by subject, in order, without a consumer."""

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import RawStreamMsg


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
