"""`Delivery.of` reads the stream sequence and delivery count from a JetStream ack subject itself, and `stream_time`
when the message entered its stream (for a consumer's lag): they must agree with nats-py's own parse for every ack
subject form, and leave anything else to nats-py."""

import pytest
from nats.aio.msg import Msg
from nats.errors import NotJSMessageError

from cairn.delivery.pull import Delivery, stream_time

ACK_SUBJECTS = [
    "$JS.ACK.CAIRN_INGEST.session-p3.1.4711.17.1764500000123456789.0",  # v1: no domain, no account hash
    "$JS.ACK.CAIRN_SESSION.indexer.3.98765432101.5.1764500000123456789.250",
    "$JS.ACK._.ACCHASH.CAIRN_INGEST.session-p0.2.12.9.1764500000123456789.4",  # v2 without the random token
    "$JS.ACK.hub.ACCHASH.CAIRN_SESSION.memory-index.7.123456.99.1764500000123456789.0.r4nd0m",  # v2
    "$JS.ACK._.ACCHASH.CAIRN_SESSION.indexer.1.5.5.1764500000123456789.0.x.future",  # more tokens later
]


def message(reply: str) -> Msg:
    return Msg(_client=None, subject="cairn.t.main.message.received.3", reply=reply, data=b"{}")  # type: ignore[arg-type]


@pytest.mark.parametrize("reply", ACK_SUBJECTS)
def test_delivery_agrees_with_nats_py_metadata(reply: str) -> None:
    delivery = Delivery.of(message(reply))
    meta = message(reply).metadata

    assert (delivery.stream_seq, delivery.num_delivered) == (meta.sequence.stream, meta.num_delivered)
    assert delivery.subject == "cairn.t.main.message.received.3"


@pytest.mark.parametrize("reply", ACK_SUBJECTS)
def test_stream_time_agrees_with_nats_py_metadata(reply: str) -> None:
    expected = message(reply).metadata.timestamp.timestamp()  # a datetime: to the microsecond
    assert stream_time(message(reply)) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("reply", ["", "_INBOX.abc.def", "$JS.ACK.CAIRN_INGEST.p.1.2", "$JS.NAK.a.b.1.2.3.4.5"])
def test_a_message_that_did_not_come_from_jetstream_is_refused_as_nats_py_refuses_it(reply: str) -> None:
    with pytest.raises(NotJSMessageError):
        Delivery.of(message(reply))


def test_a_delivery_is_a_named_tuple_with_the_fields_by_name() -> None:
    """Built for every message a consumer fetches: a named tuple costs half what a frozen dataclass does."""
    delivery = Delivery.of(message(ACK_SUBJECTS[0]))
    assert isinstance(delivery, tuple)
    assert delivery == Delivery(stream_seq=4711, num_delivered=1, subject="cairn.t.main.message.received.3")
