"""The HPUB frames `EventPublisher` writes carry the caller's trace context (cleaned as nats-py cleans headers) and
the event's own dedup id; an `Outgoing` event is encoded once. (Publishing itself: tests/integration/
test_publisher_batches.py, against the real nats-server.)"""

import uuid

import pytest
from nats.errors import BadHeaderError, BadSubjectError

from cairn.delivery import publisher
from cairn.delivery.publisher import Outgoing
from cairn.events import Event, IndexAdvanced, encode_event

TENANT = "1525f314-6741-4c00-8d03-4047f54f310d"
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _frames(data: bytes) -> list[tuple[str, str, dict[str, str], bytes]]:
    """HPUB frames back into (subject, reply, headers, payload), checking the sizes they announce."""
    frames = []
    while data:
        line, data = data.split(b"\r\n", 1)
        op, subject, reply, header_size, total = line.decode().split(" ")
        assert op == "HPUB"
        block, payload, data = data[: int(header_size)], data[int(header_size) : int(total)], data[int(total) :]
        assert data[:2] == b"\r\n"
        data = data[2:]
        version, *lines, empty, end = block.decode().split("\r\n")
        assert (version, empty, end) == ("NATS/1.0", "", "")
        frames.append((subject, reply, dict(line.split(": ", 1) for line in lines), payload))
    return frames


def test_a_frame_carries_the_headers_cleaned_as_nats_py_cleans_them_and_our_ids_win() -> None:
    carrier = {"traceparent": PARENT, " tracestate ": " vendor=abc\r\nX: y ", "Nats-Msg-Id": "theirs", "": "skipped"}
    block = publisher.header_block(carrier, "INGEST")
    headers = publisher.message_headers(block, "dedup-1\n")
    frame = publisher.hpub(b"cairn.t.a.message", b"_INBOX.abc.7", headers, b'{"x":1}')
    assert _frames(frame) == [
        (
            "cairn.t.a.message",
            "_INBOX.abc.7",
            {"traceparent": PARENT, "tracestate": "vendor=abc  X: y", "Nats-Expected-Stream": "INGEST",
             "Nats-Msg-Id": "dedup-1"},
            b'{"x":1}',
        )
    ]  # fmt: skip


def test_a_bad_header_name_or_subject_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(BadHeaderError):
        publisher.header_block({"bad name": "v"}, "INGEST")
    for subject in ("", "cairn.a b.c", "cairn.a\r\nPUB x 1"):
        with pytest.raises(BadSubjectError):
            publisher.checked_subject(subject)
    assert publisher.checked_subject("cairn.t.a.message") == b"cairn.t.a.message"


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
