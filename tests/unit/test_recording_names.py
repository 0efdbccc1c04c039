"""The names a service sweeps the processed-event records of (retention.py): every projection's own, and each
projection a merged consumer feeds (the indexer's session stream), whose records carry the part's name."""

from typing import Any, cast

from cairn.delivery.consumer import Part, PerEvent, Projection
from cairn.delivery.publisher import EventPublisher
from cairn.delivery.retention import recording_consumers
from cairn.delivery.settings import NatsSettings

NO_POOL = cast(Any, None)  # never connected: only names are asked
PUBLISHER = EventPublisher(cast(Any, None))


def projection(name: str, stream: str = "CAIRN_MEMORY") -> Projection:
    return Projection(name, stream, {}, NO_POOL, PUBLISHER, NatsSettings())


def test_a_merged_projection_s_records_are_swept_under_each_part_s_name() -> None:
    parts = [Part("indexer", PerEvent({})), Part("memory-index", PerEvent({}))]
    merged = Projection.merged("indexer-transcripts", "CAIRN_SESSION", parts, NO_POOL, PUBLISHER, NatsSettings())
    consumers = [merged, projection("memory-index"), projection("memory-index", "CAIRN_INGEST"), projection("other")]
    assert recording_consumers(consumers) == ["indexer", "memory-index", "other"]


def test_a_plain_projection_records_under_its_consumer_s_name() -> None:
    assert projection("consolidation").recording_names == ("consolidation",)
