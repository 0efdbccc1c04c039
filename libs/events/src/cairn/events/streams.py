"""Subjects and JetStream streams, declared once. Each event type lives in the stream of the service
that emits it; subjects are `cairn.<tenant>.<agent>.<event-type>`."""

import functools
from dataclasses import dataclass
from typing import get_args

from cairn.events.models import Event

INBOX_STREAM = "CAIRN_INBOX"
INGEST_STREAM = "CAIRN_INGEST"
SESSION_STREAM = "CAIRN_SESSION"
INDEX_STREAM = "CAIRN_INDEX"
MEMORY_STREAM = "CAIRN_MEMORY"
RECALL_STREAM = "CAIRN_RECALL"
DEAD_LETTER_STREAM = "CAIRN_DEAD_LETTER"
# The session service's durable consumer of CAIRN_INGEST: ingest watches its progress before it answers
# 404 for a session that may only be on its way (read-your-writes on the command side).
SESSION_CONSUMER = "session"
# The indexer's one durable consumer of CAIRN_SESSION, feeding both its projections (the full-text index and the
# memory index's transcript side); KEDA scales the indexer on its lag and `cairn bench load` waits for it.
INDEXER_CONSUMER = "indexer-transcripts"


@dataclass(frozen=True)
class StreamSpec:
    name: str
    subjects: tuple[str, ...]
    work_queue: bool = False
    duplicate_window_s: float = 3600.0
    max_age_s: float = 0.0  # 0 = keep forever: the log is the source of truth for replays
    # >0: stored subjects gain a last token, the partition of (tenant, agent), so that per-agent order
    # can be kept by one consumer per partition while the partitions spread over replicas
    partitions: int = 0


@functools.cache
def _event_type(model: type) -> str:
    """`transcript.appended.v1` -> `transcript.appended` (the subject suffix); asked for every event published, and
    pydantic's `model_fields` is a property that builds its answer on each access."""
    literal = model.model_fields["type"].default  # type: ignore[attr-defined]
    return str(literal).rsplit(".", 1)[0]


_OWNERS: dict[str, tuple[str, ...]] = {
    INGEST_STREAM: (
        "message.received",
        "session.command",
        "memory.write-requested",
        "memory.record-requested",
        "erasure.requested",
        "agent.configured",
    ),
    SESSION_STREAM: (
        "transcript.appended",
        "session.reset-boundary",
        "session.compaction-imminent",
        "session.created",
        "session.forked",
    ),
    INDEX_STREAM: ("index.advanced",),
    MEMORY_STREAM: ("memory.document-changed", "erasure.completed"),
    RECALL_STREAM: ("recall.performed",),
}

_MODELS = get_args(get_args(Event)[0])
_STREAM_OF: dict[str, str] = {t: stream for stream, types in _OWNERS.items() for t in types}
if {_event_type(m) for m in _MODELS} != set(_STREAM_OF):
    raise RuntimeError("every event type must belong to exactly one stream")

INGEST_PARTITIONS = 8
_PARTITIONS = {INGEST_STREAM: INGEST_PARTITIONS}

STREAMS: tuple[StreamSpec, ...] = (
    StreamSpec(INBOX_STREAM, ("cairn.in.*.message",), work_queue=True),
    *(
        StreamSpec(name, tuple(f"cairn.*.*.{t}" for t in types), partitions=_PARTITIONS.get(name, 0))
        for name, types in _OWNERS.items()
    ),
    StreamSpec(DEAD_LETTER_STREAM, ("cairn-dead-letter.>",), duplicate_window_s=120.0),
)


PARTITION_SOURCE = "cairn.*.*.*.*"


def partition_destination(partitions: int) -> str:
    """Where a partitioned stream stores `cairn.<tenant>.<agent>.<a>.<b>`: the same plus the partition."""
    return "cairn.{{wildcard(1)}}.{{wildcard(2)}}.{{wildcard(3)}}.{{wildcard(4)}}." + (
        f"{{{{partition({partitions},1,2)}}}}"
    )


def partition_filter(partition: int) -> str:
    return f"cairn.*.*.*.*.{partition}"


def subject_for(event: Event) -> str:
    return f"cairn.{event.tenant_id}.{event.agent_id}.{_event_type(type(event))}"


def stream_for(event: Event) -> str:
    return _STREAM_OF[_event_type(type(event))]


def subject_pattern(event_type: str, tenant: str = "*", agent: str = "*") -> str:
    return f"cairn.{tenant}.{agent}.{event_type}"


def inbound_subject(tenant_id: str) -> str:
    return f"cairn.in.{tenant_id}.message"


DEAD_LETTER_PREFIX = "cairn-dead-letter."
# a dead letter's tenant token when its message names none (or none that fits a subject token)
UNKNOWN_TENANT = "-"


def dead_letter_subject(consumer: str, tenant: str | None) -> str:
    """`cairn-dead-letter.<consumer>.<tenant>`: the tenant in the subject lets one tenant's letters be counted from
    the stream's per-subject state in one request. Either may be `*` for a pattern (`dead_letter_subject(consumer,
    "*")`: a consumer's letters)."""
    return f"{DEAD_LETTER_PREFIX}{consumer}.{tenant or UNKNOWN_TENANT}"
