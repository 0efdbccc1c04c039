"""The dead-letter stream read and settled: what `cairn dead-letters` shows an operator, and the counts per consumer
that a status page or metrics report for a tenant.

A dead letter is the original payload on `cairn-dead-letter.<consumer>.<tenant>` (`-` for no tenant), with why and
where from in `Cairn-*` headers (`PullConsumer.dead_letter`): one tenant's counts are the stream's per-subject state
for `cairn-dead-letter.*.<tenant>`, one request however many letters there are.

A retry publishes the payload again on its original subject, under a message id of its own: the original id is still
inside JetStream's duplicate window for an hour and would be dropped. An event the consumer did apply after all is
not applied twice: its `processed_events` record makes the redelivery a no-op.
"""

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import RawStreamMsg
from pydantic import ValidationError

from cairn.events import DEAD_LETTER_STREAM, STREAMS, dead_letter_subject, decode_event
from cairn.events.streams import DEAD_LETTER_PREFIX, UNKNOWN_TENANT

# what may stand as one subject token: a tenant named only by a payload could hold dots or wildcards
_TOKEN = re.compile(r"[^.*>\s]+")
# headers of the original message that are JetStream's own (re-set by a retry) or the dead letter's record
_NOT_REPUBLISHED = ("nats-", "cairn-")
_PARTITIONS = {spec.name: spec.partitions for spec in STREAMS}


class DeadLetterNotFound(LookupError):
    """No dead letter at that sequence (never there, retried or discarded)."""


class NotRetryable(ValueError):
    """A dead letter whose payload cannot be sent again, with why."""


@dataclass(frozen=True)
class DeadLetter:
    seq: int  # its place in CAIRN_DEAD_LETTER: what `show`, `retry` and `discard` name
    consumer: str
    tenant: str | None
    reason: str
    subject: str  # the original message's subject, as its stream stored it
    stream: str
    stream_seq: int
    deliveries: int
    time: datetime | None
    data: bytes
    headers: dict[str, str] = field(repr=False)

    def payload(self) -> Any:
        """The payload decoded: the event as JSON, an adapter's JSON message as is, or else its text."""
        try:
            return decode_event(self.data).model_dump(mode="json")
        except ValidationError:
            pass
        try:
            return json.loads(self.data)
        except ValueError:
            return self.data.decode(errors="replace")


@dataclass(frozen=True)
class Retried:
    letter: DeadLetter
    subject: str  # where it was published again
    seq: int  # its new place in the original stream
    duplicate: bool  # a retry of this dead letter had published it already (then it was not published again)


def tenant_of(subject: str, data: bytes = b"") -> str | None:
    """The tenant of a message: from its subject (`cairn.<tenant>.<agent>.<type>`, or an adapter's
    `cairn.in.<tenant>.message`), else from an event payload's `tenant_id`."""
    tokens = subject.split(".")
    if len(tokens) >= 4 and tokens[0] == "cairn":
        return tokens[2] if tokens[1] == "in" else tokens[1]
    try:
        tenant = json.loads(data).get("tenant_id")
    except (ValueError, AttributeError):
        return None
    return tenant if isinstance(tenant, str) else None


def letter_subject(consumer: str, subject: str, data: bytes = b"") -> str:
    """Where a consumer parks a message that arrived on `subject`: under its tenant's token, or `-` for a message that
    names no tenant fit to be one (its letter is then counted for no tenant)."""
    tenant = tenant_of(subject, data)
    return dead_letter_subject(consumer, tenant if tenant and _TOKEN.fullmatch(tenant) else UNKNOWN_TENANT)


def _tenant_pattern(tenant: str) -> str:
    if not _TOKEN.fullmatch(tenant):
        raise ValueError(f"not a tenant id: {tenant!r}")
    return tenant


def _letter(message: RawStreamMsg) -> DeadLetter:
    headers = dict(message.headers or {})
    subject = headers.get("Cairn-Subject", "")
    data = message.data or b""
    # `cairn-dead-letter.<consumer>.<tenant>`; a letter parked before the tenant joined the subject has no third token
    consumer = (message.subject or "").removeprefix(DEAD_LETTER_PREFIX).split(".", 1)[0]
    return DeadLetter(
        seq=message.seq or 0,
        consumer=consumer,
        tenant=tenant_of(subject, data),
        reason=headers.get("Cairn-Error", ""),
        subject=subject,
        stream=headers.get("Cairn-Stream", ""),
        stream_seq=int(headers.get("Cairn-Stream-Seq") or 0),
        deliveries=int(headers.get("Cairn-Deliveries") or 0),
        time=message.time,
        data=data,
        headers=headers,
    )


async def _stored(js: JetStreamContext, subject: str) -> AsyncIterator[RawStreamMsg]:
    """Every message on `subject` (wildcards allowed), in order, one request each: dead letters are few."""
    seq = 1
    while True:
        try:
            message = await js.get_msg(DEAD_LETTER_STREAM, seq=seq, subject=subject, next=True)
        except nats.js.errors.NotFoundError:
            return
        yield message
        seq = (message.seq or seq) + 1


async def dead_letters(
    js: JetStreamContext, tenant: str | None = None, consumer: str | None = None
) -> list[DeadLetter]:
    """The dead letters, oldest first: only a tenant's, only a consumer's, when asked (both read by subject)."""
    if tenant is None and consumer is None:
        subject = DEAD_LETTER_PREFIX + ">"  # letters parked before the tenant joined the subject included
    else:
        subject = dead_letter_subject(consumer or "*", "*" if tenant is None else _tenant_pattern(tenant))
    return [_letter(message) async for message in _stored(js, subject)]


async def count_dead_letters(js: JetStreamContext, tenant: str | None = None) -> dict[str, int]:
    """How many dead letters each consumer has, for one tenant or all (consumers without any are left out): one
    request, the stream's per-subject counts summed per consumer."""
    pattern = DEAD_LETTER_PREFIX + ">" if tenant is None else dead_letter_subject("*", _tenant_pattern(tenant))
    info = await js.stream_info(DEAD_LETTER_STREAM, subjects_filter=pattern)
    counts: dict[str, int] = {}
    for subject, count in sorted((info.state.subjects or {}).items()):
        consumer = subject.removeprefix(DEAD_LETTER_PREFIX).split(".", 1)[0]
        if count:
            counts[consumer] = counts.get(consumer, 0) + count
    return counts


async def dead_letter(js: JetStreamContext, seq: int) -> DeadLetter:
    try:
        message = await js.get_msg(DEAD_LETTER_STREAM, seq=seq)
    except nats.js.errors.NotFoundError:
        raise DeadLetterNotFound(f"no dead letter {seq} in {DEAD_LETTER_STREAM} (retried or discarded?)") from None
    return _letter(message)


def published_subject(letter: DeadLetter) -> str:
    """The subject the original was published on: a partitioned stream stores it with its partition appended."""
    if _PARTITIONS.get(letter.stream):
        return letter.subject.rsplit(".", 1)[0]
    return letter.subject


def retry_msg_id(letter: DeadLetter) -> str:
    """The retry's own message id: not the original's (still in the duplicate window, it would be dropped), and the
    same for every retry of this dead letter, so a retry repeated after a crash is dropped instead."""
    return f"cairn-retry:{letter.consumer}:{letter.stream}:{letter.stream_seq}:{letter.seq}"


async def retry(js: JetStreamContext, seq: int) -> Retried:
    """Publish the dead letter's payload and original headers on its original subject again, then delete it."""
    letter = await dead_letter(js, seq)
    if not letter.data:
        raise NotRetryable(f"dead letter {seq}: its payload was not kept (it must never be stored); discard it")
    if not letter.stream or not letter.subject:
        raise NotRetryable(f"dead letter {seq}: it does not say which stream and subject it came from")
    subject = published_subject(letter)
    headers = {k: v for k, v in letter.headers.items() if not k.lower().startswith(_NOT_REPUBLISHED)}
    headers["Nats-Msg-Id"] = retry_msg_id(letter)
    ack = await js.publish(subject, letter.data, stream=letter.stream, headers=headers)
    await js.delete_msg(DEAD_LETTER_STREAM, seq)
    return Retried(letter, subject, ack.seq, bool(ack.duplicate))


async def discard(js: JetStreamContext, seq: int) -> DeadLetter:
    """Delete a dead letter for good; returns what it was."""
    letter = await dead_letter(js, seq)
    await js.delete_msg(DEAD_LETTER_STREAM, seq)
    return letter
