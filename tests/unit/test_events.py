"""Wire events: every type round-trips, golden v1 samples stay decodable byte for byte, bad input is
refused, and the streams' subjects are disjoint (JetStream refuses streams whose subjects overlap)."""

import json
from itertools import combinations
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel, ValidationError

from cairn.events import (
    DEAD_LETTER_STREAM,
    INBOX_STREAM,
    INDEX_STREAM,
    INGEST_STREAM,
    MEMORY_STREAM,
    RECALL_STREAM,
    SESSION_STREAM,
    STREAMS,
    AgentConfigured,
    CompactionImminent,
    DocumentChanged,
    ErasureCompleted,
    ErasureRequested,
    Event,
    InboundMessage,
    IndexAdvanced,
    MemoryWriteRequested,
    MessageReceived,
    RecallPerformed,
    RecordRequested,
    ResetBoundary,
    SessionCommand,
    SessionCreated,
    SessionForked,
    TranscriptAppended,
    dead_letter_subject,
    decode_event,
    encode_event,
    inbound_subject,
    stream_for,
    subject_for,
)

GOLDEN = Path(__file__).parent.parent / "golden" / "events"
TENANT = "0b5e8f9a-3c1d-4e2f-8a6b-7c9d0e1f2a3b"
SID = "5f0c2d3e-4b5a-4c6d-9e8f-0a1b2c3d4e5f"
MEMBERS: tuple[type[BaseModel], ...] = get_args(get_args(Event)[0])


def type_of(model: type[BaseModel]) -> str:
    return str(model.model_fields["type"].default)


def minimal(model: type[BaseModel]) -> Event:
    """An instance of `model` with only its required fields set, so every default is exercised too."""
    required: dict[type[BaseModel], dict[str, Any]] = {
        MessageReceived: {"session_key": "agent:main:main", "message": InboundMessage(text="hi")},
        SessionCommand: {"command": "reset", "session_key": "agent:main:main"},
        TranscriptAppended: {
            "session_key": "agent:main:main",
            "session_id": SID,
            "position": 1,
            "reset_index": 0,
            "message_id": "m",
            "role": "user",
            "text": "hi",
            "channel": "api",
            "chat_type": "direct",
            "token_estimate": 1,
        },
        ResetBoundary: {
            "session_key": "agent:main:main",
            "session_id": SID,
            "position": 2,
            "reason": "new",
            "reset_index": 1,
        },
        CompactionImminent: {
            "session_key": "agent:main:main",
            "session_id": SID,
            "cycle": 0,
            "estimated_tokens": 176_000,
            "transcript_bytes": 10,
            "threshold_tokens": 176_000,
        },
        SessionCreated: {"session_key": "k", "session_id": SID, "chat_type": "group", "channel": "telegram"},
        SessionForked: {
            "session_key": "k2",
            "session_id": SID,
            "parent_session_key": "k",
            "parent_session_id": SID,
            "from_position": 3,
        },
        MemoryWriteRequested: {"path": "MEMORY.md", "mode": "delete"},
        RecordRequested: {"record_id": SID, "text": "I don't eat spicy food any more"},
        DocumentChanged: {"path": "MEMORY.md", "version": 1, "change": "created"},
        ErasureRequested: {"scope": "session", "target": "agent:main:main"},
        ErasureCompleted: {"request_id": "r"},
        IndexAdvanced: {"ingest_seq": 7},
        RecallPerformed: {"session_key": "agent:main:main", "outcome": "skipped"},
        AgentConfigured: {"version": 1, "config": {}},
    }
    event: Event = model.model_validate({"tenant_id": TENANT, **required[model]})  # type: ignore[assignment]
    return event


def golden_text(event_type: str) -> str:
    return (GOLDEN / f"{event_type}.json").read_text("utf-8")


def golden(event_type: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(golden_text(event_type))
    return data


def validation_errors(data: dict[str, Any]) -> list[dict[str, Any]]:
    with pytest.raises(ValidationError) as caught:
        decode_event(json.dumps(data))
    return [dict(e) for e in caught.value.errors()]


@pytest.mark.parametrize("model", MEMBERS, ids=type_of)
def test_every_event_type_round_trips(model: type[BaseModel]) -> None:
    event = minimal(model)
    decoded = decode_event(encode_event(event))
    assert type(decoded) is model
    assert decoded == event
    assert decode_event(encode_event(event).decode()) == event  # str input too


def test_the_union_has_fifteen_distinct_versioned_types() -> None:
    types = [type_of(m) for m in MEMBERS]
    assert len(types) == len(set(types)) == 15
    assert all(t.endswith(".v1") for t in types)


@pytest.mark.parametrize("model", MEMBERS, ids=type_of)
def test_every_union_member_has_a_golden_sample(model: type[BaseModel]) -> None:
    assert (GOLDEN / f"{type_of(model)}.json").is_file(), f"add tests/golden/events/{type_of(model)}.json"


def test_no_golden_sample_is_stale() -> None:
    """A golden for a type no longer in the union means a v1 model was dropped, which is not additive."""
    assert {p.name.removesuffix(".json") for p in GOLDEN.glob("*.json")} == {type_of(m) for m in MEMBERS}


@pytest.mark.parametrize("model", MEMBERS, ids=type_of)
def test_golden_decodes_and_re_encodes_to_the_same_json(model: type[BaseModel]) -> None:
    """A renamed, removed or retyped field (an incompatible v1 change) fails here; an additive field
    means adding it to the sample."""
    event_type = type_of(model)
    decoded = decode_event(golden_text(event_type))
    assert type(decoded) is model
    assert decoded.type == event_type
    assert json.loads(encode_event(decoded)) == golden(event_type)


@pytest.mark.parametrize("model", MEMBERS, ids=type_of)
def test_golden_samples_set_every_field(model: type[BaseModel]) -> None:
    """So the re-encoding check above covers every field of the model, not just the defaults."""
    assert set(golden(type_of(model))) == set(model.model_fields)


# Fields added to a v1 type after it was first published, with the default an old event decodes to.
ADDED_LATER: dict[str, dict[str, Any]] = {
    "session.command.v1": {"session_id": None, "chat_type": "direct", "channel": "api"},
    "session.forked.v1": {"ingest_seq": None},
    "session.created.v1": {"ingest_seq": None},
    "memory.document-changed.v1": {"ingest_seq": None},
    "session.compaction-imminent.v1": {"reset_index": 0, "up_to_position": None, "forced": False},
}


@pytest.mark.parametrize("event_type", sorted(ADDED_LATER))
def test_events_written_before_an_additive_field_still_decode(event_type: str) -> None:
    """The sample as it was first published (without the added fields) decodes, taking the defaults."""
    first_published = {k: v for k, v in golden(event_type).items() if k not in ADDED_LATER[event_type]}
    decoded = decode_event(json.dumps(first_published))
    assert {field: getattr(decoded, field) for field in ADDED_LATER[event_type]} == ADDED_LATER[event_type]


def test_agent_configured_carries_the_whole_effective_config() -> None:
    """A minimal config is filled in with every default, so consumers never merge partial configs."""
    event = minimal(AgentConfigured)
    assert isinstance(event, AgentConfigured)
    assert json.loads(encode_event(event))["config"] == {
        "dm_scope": "main",
        "identity_links": {},
        "group_scope": "group",
        "reset": {"mode": "none", "at_hour": 4, "idle_minutes": 60, "timezone": "UTC"},
        "reset_by_type": {},
        "context_window": None,
        "compaction": {"reserve_tokens": None, "soft_threshold_tokens": None, "max_transcript_bytes": None},
        "sessions_visibility": "tree",
        "remember_across_conversations": None,
        "retention": {"dormant_after_days": None, "archive_after_days": None},
        "active_memory": {
            "mode": "escalate",
            "query_mode": "recent",
            "allowed_chat_types": ["direct"],
            "allowed_chat_ids": [],
            "denied_chat_ids": [],
            "timeout_ms": 15000,
            "min_score": 0.65,
        },
        "owner_peers": [],
    }


def test_agent_configured_published_before_group_scope_reset_by_type_and_retention_still_decodes() -> None:
    first_published = golden("agent.configured.v1")
    for added in ("group_scope", "reset_by_type", "retention", "compaction", "active_memory", "owner_peers"):
        del first_published["config"][added]
    decoded = decode_event(json.dumps(first_published))
    assert isinstance(decoded, AgentConfigured)
    assert (decoded.config.group_scope, decoded.config.reset_by_type) == ("group", {})
    assert decoded.config.retention.archive_after_days is None
    assert (decoded.config.active_memory.mode, decoded.config.owner_peers) == ("escalate", ())


def test_event_time_offset_is_kept_apart_from_record_time() -> None:
    decoded = decode_event(golden_text("transcript.appended.v1"))
    assert decoded.occurred_at.isoformat() == "2026-11-29T09:30:00+08:00"
    assert decoded.recorded_at.isoformat() == "2026-11-29T01:30:00.250000+00:00"


def test_unknown_type_is_rejected() -> None:
    data = golden("transcript.appended.v1") | {"type": "transcript.appended.v9"}
    errors = validation_errors(data)
    assert [e["type"] for e in errors] == ["union_tag_invalid"]


def test_missing_type_is_rejected() -> None:
    data = golden("index.advanced.v1")
    del data["type"]
    assert [e["type"] for e in validation_errors(data)] == ["union_tag_not_found"]


@pytest.mark.parametrize("model", MEMBERS, ids=type_of)
def test_missing_tenant_is_rejected(model: type[BaseModel]) -> None:
    data = golden(type_of(model))
    del data["tenant_id"]
    errors = validation_errors(data)
    assert [(e["type"], e["loc"][-1]) for e in errors] == [("missing", "tenant_id")]


@pytest.mark.parametrize("tenant", ["a.b", "a*", ">", "with space", "", "x" * 65])
def test_tenant_that_is_no_subject_token_is_rejected(tenant: str) -> None:
    errors = validation_errors(golden("index.advanced.v1") | {"tenant_id": tenant})
    assert [e["loc"][-1] for e in errors] == ["tenant_id"]


@pytest.mark.parametrize(
    ("event_type", "path"),
    [
        ("transcript.appended.v1", ("occurred_at",)),
        ("transcript.appended.v1", ("recorded_at",)),
        ("message.received.v1", ("message", "occurred_at")),
        ("session.reset-boundary.v1", ("closed_window_tail", 0, "occurred_at")),
    ],
    ids=["occurred_at", "recorded_at", "inbound-message", "transcript-line"],
)
def test_naive_datetime_is_rejected(event_type: str, path: tuple[str | int, ...]) -> None:
    data = golden(event_type)
    parent: Any = data
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = "2026-11-29T09:30:00"
    errors = validation_errors(data)
    assert len(errors) == 1
    assert errors[0]["loc"][1:] == path
    assert "UTC offset" in errors[0]["msg"]


@pytest.mark.parametrize(
    ("event_type", "path"),
    [
        ("transcript.appended.v1", ()),
        ("message.received.v1", ("message",)),
        ("session.reset-boundary.v1", ("closed_window_tail", 1)),
    ],
    ids=["envelope", "inbound-message", "transcript-line"],
)
def test_extra_field_is_rejected(event_type: str, path: tuple[str | int, ...]) -> None:
    data = golden(event_type)
    target: Any = data
    for step in path:
        target = target[step]
    target["surprise"] = 1
    errors = validation_errors(data)
    assert [(e["type"], e["loc"][1:]) for e in errors] == [("extra_forbidden", (*path, "surprise"))]


def test_events_are_frozen() -> None:
    event = minimal(IndexAdvanced)
    with pytest.raises(ValidationError):
        event.tenant_id = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("event_type", "agent", "subject", "stream"),
    [
        ("transcript.appended.v1", "main", f"cairn.{TENANT}.main.transcript.appended", SESSION_STREAM),
        ("session.reset-boundary.v1", "main", f"cairn.{TENANT}.main.session.reset-boundary", SESSION_STREAM),
        ("message.received.v1", "main", f"cairn.{TENANT}.main.message.received", INGEST_STREAM),
        ("session.command.v1", "ops", f"cairn.{TENANT}.ops.session.command", INGEST_STREAM),
        ("agent.configured.v1", "ops", f"cairn.{TENANT}.ops.agent.configured", INGEST_STREAM),
        ("index.advanced.v1", "main", f"cairn.{TENANT}.main.index.advanced", INDEX_STREAM),
        ("memory.document-changed.v1", "main", f"cairn.{TENANT}.main.memory.document-changed", MEMORY_STREAM),
        ("recall.performed.v1", "support-bot", f"cairn.{TENANT}.support-bot.recall.performed", RECALL_STREAM),
    ],
)
def test_subject_and_stream_of_an_event(event_type: str, agent: str, subject: str, stream: str) -> None:
    event = decode_event(json.dumps(golden(event_type) | {"agent_id": agent}))
    assert subject_for(event) == subject
    assert stream_for(event) == stream


def subjects_overlap(a: str, b: str) -> bool:
    """Whether some subject matches both NATS patterns: `*` is one token, `>` one or more trailing tokens."""
    left, right = a.split("."), b.split(".")
    for x, y in zip(left, right, strict=False):
        if ">" in (x, y):
            return True  # both still have a token here, and `>` absorbs whatever follows on the other side
        if x != y and "*" not in (x, y):
            return False
    return len(left) == len(right)


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        ("a.b", "a.b", True),
        ("a.b", "a.c", False),
        ("a.*", "a.b", True),
        ("*.b", "a.*", True),
        ("a.*", "a.b.c", False),
        ("a.>", "a", False),
        ("a.>", "a.b.c", True),
        ("a.>", "*.*", True),
        (">", "x", True),
        ("a.>", "b.>", False),
        ("cairn.in.*.message", "cairn.*.*.message", True),
        ("cairn.in.*.message", "cairn.*.*.message.received", False),
        ("cairn.*.*.session.command", "cairn.*.*.session.created", False),
        ("cairn.>", "cairn-dead-letter.>", False),
        ("cairn.>", "cairn.in.*.message", True),
    ],
)
def test_subject_overlap_check(a: str, b: str, overlap: bool) -> None:
    assert subjects_overlap(a, b) is overlap
    assert subjects_overlap(b, a) is overlap


def test_no_two_streams_have_overlapping_subjects() -> None:
    owned = [(spec.name, subject) for spec in STREAMS for subject in spec.subjects]
    clashes = [(x, y) for x, y in combinations(owned, 2) if subjects_overlap(x[1], y[1])]
    assert clashes == []


def test_stream_names_are_unique_and_only_the_inbox_is_a_work_queue() -> None:
    names = [spec.name for spec in STREAMS]
    assert len(names) == len(set(names))
    assert {spec.name for spec in STREAMS if spec.work_queue} == {INBOX_STREAM}


def streams_matching(subject: str) -> list[str]:
    return [spec.name for spec in STREAMS if any(subjects_overlap(subject, s) for s in spec.subjects)]


@pytest.mark.parametrize("model", MEMBERS, ids=type_of)
def test_each_event_subject_is_captured_by_its_own_stream_only(model: type[BaseModel]) -> None:
    event = minimal(model)
    assert streams_matching(subject_for(event)) == [stream_for(event)]


def test_inbound_and_dead_letter_subjects_have_one_stream_each() -> None:
    assert streams_matching(inbound_subject(TENANT)) == [INBOX_STREAM]
    assert streams_matching(dead_letter_subject("indexer", TENANT)) == [DEAD_LETTER_STREAM]
    assert streams_matching(dead_letter_subject("indexer", None)) == [DEAD_LETTER_STREAM]
    assert streams_matching(dead_letter_subject("indexer", "*")) == [DEAD_LETTER_STREAM]


def test_a_dead_letter_subject_names_its_consumer_and_tenant() -> None:
    assert dead_letter_subject("session-p3", TENANT) == f"cairn-dead-letter.session-p3.{TENANT}"
    assert dead_letter_subject("ingest", None) == "cairn-dead-letter.ingest.-", "no tenant: one token all the same"
    assert dead_letter_subject("*", TENANT) == f"cairn-dead-letter.*.{TENANT}", "a tenant's letters of any consumer"
