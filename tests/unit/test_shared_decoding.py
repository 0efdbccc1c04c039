"""Decoding shared by the projections of one process that read the same stream (the indexer's two consumers of
the session stream): the same bytes give the same frozen event, decoded once; garbage is never kept."""

import uuid

import pytest
from pydantic import ValidationError

from cairn.events import RecallPerformed, decode_event, encode_event
from cairn.platform.consumer import SharedDecoding


def recall() -> bytes:
    return encode_event(RecallPerformed(tenant_id=str(uuid.uuid4()), session_key="agent:main:main",
                                        outcome="injected", items=2))  # fmt: skip


def test_the_same_bytes_are_decoded_once_into_the_event_they_encode() -> None:
    shared, data = SharedDecoding(), recall()
    event = shared(data)
    assert event == decode_event(data)
    assert shared(bytes(data)) is event, "an equal message, fetched by the other consumer, is not decoded again"
    other = recall()
    assert shared(other) == decode_event(other) != event


def test_it_keeps_only_the_most_recent_events() -> None:
    shared = SharedDecoding(size=2)
    first, second, third = recall(), recall(), recall()
    kept_first = shared(first)
    kept_second = shared(second)
    shared(third)
    assert shared(second) is kept_second
    again = shared(first)
    assert again == kept_first
    assert again is not kept_first, "the oldest was let go and decoded again"


def test_garbage_raises_every_time() -> None:
    shared = SharedDecoding()
    for _ in range(2):
        with pytest.raises(ValidationError):
            shared(b"\xff not an event")
