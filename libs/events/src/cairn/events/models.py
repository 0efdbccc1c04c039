"""The wire events. Each is frozen, has a literal versioned `type`, and belongs to one union.

Versioning is additive: a new optional field keeps `.v1`; a breaking change is a new `.v2` model
plus a pure upcaster in `upcasters.py`.
"""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from cairn.events.agents import AgentConfig, ChatType
from cairn.events.envelope import MAX_VERSION, AwareDatetime, Envelope, Token, Uuid
from cairn.events.fields import EventTime, FreeText, Name

Role = Literal["user", "assistant", "tool", "system"]
ResetReason = Literal["new", "reset", "api", "idle", "daily"]

MAX_TEXT_CHARS = 65_536
MAX_RECORD_CHARS = 2_000  # one fact, rendered as one line of a bank file


class InboundMessage(BaseModel):
    """What an adapter says was said: the body of `POST /v1/messages` and of `cairn.in.<tenant>.message`."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=False)

    agent_id: Token = "main"
    channel: Token = "api"
    account_id: Name | None = Field(default=None, max_length=128)
    chat_type: ChatType = "direct"
    peer_id: Name | None = Field(default=None, max_length=256)
    chat_id: Name | None = Field(default=None, max_length=256)
    thread_id: Name | None = Field(default=None, max_length=256)
    sender_name: Name | None = Field(default=None, max_length=256)
    role: Role = "user"
    text: FreeText = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    message_id: Name | None = Field(default=None, min_length=1, max_length=256)
    occurred_at: EventTime | None = None
    session_key: Name | None = Field(default=None, min_length=1, max_length=512)


class MessageReceived(Envelope):
    """Ingest accepted one message; the session service routes and appends it."""

    type: Literal["message.received.v1"] = "message.received.v1"
    session_key: Name
    message: InboundMessage


class SessionCommand(Envelope):
    """A session operation asked for through the API (reset, console thread, fork, compaction report).

    For `create` and `fork`, `session_key` and `session_id` are the new session's, chosen by ingest so
    that it can answer at once; `parent_session_key` names the session a thread or fork comes from.
    `compaction` reports that the agent runtime compacted its context, keeping `first_kept_message_id`
    onwards: it closes the compaction cycle.
    """

    type: Literal["session.command.v1"] = "session.command.v1"
    command: Literal["reset", "create", "fork", "compaction"]
    session_key: Name
    reason: ResetReason = "api"
    parent_session_key: Name | None = None
    from_message_id: Name | None = None
    incognito: bool = False
    session_id: Uuid | None = None
    chat_type: ChatType = "direct"
    channel: Token = "api"
    first_kept_message_id: Name | None = None


class TranscriptLine(BaseModel):
    """One message as carried inside another event (snapshots need the tail of a closed window)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    message_id: str
    role: Role
    text: str
    sender_name: str | None = None
    occurred_at: EventTime


class TranscriptAppended(Envelope):
    """One entry was durably appended to a session's transcript."""

    type: Literal["transcript.appended.v1"] = "transcript.appended.v1"
    session_key: str
    session_id: str
    position: int = Field(ge=1)
    reset_index: int = Field(ge=0)
    message_id: str
    external_id: str | None = None
    role: Role
    text: str
    sender_name: str | None = None
    peer_id: str | None = None
    channel: str
    chat_type: ChatType
    token_estimate: int = Field(ge=0)
    ingest_seq: int | None = None


class ResetBoundary(Envelope):
    """A reset recorded a boundary: a new history window starts, nothing is deleted."""

    type: Literal["session.reset-boundary.v1"] = "session.reset-boundary.v1"
    session_key: str
    session_id: str
    position: int = Field(ge=1)
    reason: ResetReason
    reset_index: int = Field(ge=1)
    closed_window_tail: tuple[TranscriptLine, ...] = ()
    ingest_seq: int | None = None


class CompactionImminent(Envelope):
    """The live window crossed the compaction threshold; fired once per compaction cycle."""

    type: Literal["session.compaction-imminent.v1"] = "session.compaction-imminent.v1"
    session_key: str
    session_id: str
    cycle: int = Field(ge=0)
    estimated_tokens: int
    transcript_bytes: int
    threshold_tokens: int
    # The flush's snapshot, fixed when the event is emitted: the window (`reset_index`) and its last transcript
    # position then, so a compaction or messages that come meanwhile change nothing the flush reads. An event from
    # before these fields has none: its flush reads the window as it is when the flush runs.
    reset_index: int = Field(default=0, ge=0)
    up_to_position: int | None = Field(default=None, ge=1)
    # Emitted by a compaction report of a cycle whose threshold cairn never saw crossed (the runtime compacted on
    # an overflow or by command): the flush is still due, once, for the cycle the compaction closes.
    forced: bool = False


class SessionCreated(Envelope):
    """A session row now exists. `ingest_seq` is set only when nothing else follows for that ingest
    position (a console thread created by command), so that read-your-writes can count on it."""

    type: Literal["session.created.v1"] = "session.created.v1"
    session_key: str
    session_id: str
    chat_type: ChatType
    channel: str
    parent_session_id: str | None = None
    ingest_seq: int | None = None


class SessionForked(Envelope):
    """A child session was created from a parent's window up to `from_position` (the parent's position of
    the last copied entry). Sent after the copied entries' `transcript.appended`, which carry no
    `ingest_seq`: the fork's ingest position arrives here, so that an index that has reached it holds the
    whole copied history."""

    type: Literal["session.forked.v1"] = "session.forked.v1"
    session_key: str
    session_id: str
    parent_session_key: str
    parent_session_id: str
    from_position: int
    ingest_seq: int | None = None


class AgentConfigured(Envelope):
    """An agent's settings were replaced; carries the whole effective config and its version."""

    type: Literal["agent.configured.v1"] = "agent.configured.v1"
    version: int = Field(ge=1)
    config: AgentConfig


class MemoryWriteRequested(Envelope):
    """A client asked to change a memory document; consolidation applies it (or records why not, under
    this event's id, for ingest to answer with). `if_match` 0 means: only if the document does not exist.
    The path and text are checked by ingest (`cairn.events.documents`), and again by consolidation."""

    type: Literal["memory.write-requested.v1"] = "memory.write-requested.v1"
    path: Name
    mode: Literal["put", "append", "delete"]
    text: FreeText = ""
    if_match: int | None = Field(default=None, ge=0, le=MAX_VERSION)


class RecordRequested(Envelope):
    """A fact to keep as a memory record, asked for explicitly (`POST /v1/memory/records`, an agent's
    `add_memory` tool); consolidation dedups it against the agent's records, stores it or merges it, and
    renders it into the bank. `record_id` is chosen by ingest so the client can read the record at once;
    a request merged into an existing record is found under the existing record's id and under this one.
    `kind`, `entity` and `relation` left empty are decided by consolidation."""

    type: Literal["memory.record-requested.v1"] = "memory.record-requested.v1"
    record_id: Uuid
    text: FreeText = Field(min_length=1, max_length=MAX_RECORD_CHARS)
    kind: Literal["profile", "preference", "event", "plan", "lesson", "project"] | None = None
    entity: Name | None = Field(default=None, max_length=200)
    relation: Name | None = Field(default=None, max_length=200)
    importance: float = Field(default=1.0, ge=0.0, le=1.0)
    session_key: Name | None = None
    message_ids: tuple[Name, ...] = ()
    origin: Literal["owner", "agent", "untrusted", "system"] = "agent"
    # What model extraction (consolidation) adds when it asks for a record of what was said: the words as said,
    # when the fact holds in the world (a resolved "next Tuesday"), whether the speaker corrected an earlier value,
    # and that it was not asked for explicitly (it then passes the importance gate like any candidate).
    session_id: Name | None = None
    original: FreeText | None = Field(default=None, max_length=MAX_RECORD_CHARS)
    valid_from: EventTime | None = None
    valid_until: EventTime | None = None
    correction: bool = False
    explicit: bool = True


class DocumentChanged(Envelope):
    """A memory document has a new version: its whole text (empty when deleted). Versions of a path count
    1, 2, 3… across deletions. `ingest_seq`: the CAIRN_INGEST position of the write or reset that caused
    the change, when one did (read-your-writes for the memory index)."""

    type: Literal["memory.document-changed.v1"] = "memory.document-changed.v1"
    path: str
    version: int
    change: Literal["created", "updated", "deleted"]
    text: str = ""
    ingest_seq: int | None = None


class ErasureRequested(Envelope):
    type: Literal["erasure.requested.v1"] = "erasure.requested.v1"
    scope: Literal["session", "message", "peer", "document"]
    target: str


class ErasureCompleted(Envelope):
    type: Literal["erasure.completed.v1"] = "erasure.completed.v1"
    request_id: str
    removed: dict[str, int] = Field(default_factory=dict)


class IndexAdvanced(Envelope):
    """The indexer's projection now covers everything up to this ingest sequence."""

    type: Literal["index.advanced.v1"] = "index.advanced.v1"
    ingest_seq: int


class RecallPerformed(Envelope):
    """What a `POST /v1/recall` did: its outcome and, since issue 29, its whole trace (recall.traces holds the
    same for a while; `GET /v1/recall/traces/{trace_id}`). Published with `Nats-Msg-Id` = `trace_id`."""

    type: Literal["recall.performed.v1"] = "recall.performed.v1"
    session_key: str
    outcome: str
    lane: int | None = None
    items: int = 0
    elapsed_ms: float = 0.0
    trace_id: Uuid | None = None
    query: str | None = None
    reason: str | None = None
    candidates: list[dict[str, Any]] = Field(default_factory=list)
    injected: list[dict[str, Any]] = Field(default_factory=list)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    model: str | None = None
    tokens: dict[str, int] = Field(default_factory=dict)
    fallbacks: list[str] = Field(default_factory=list)


Event = Annotated[
    MessageReceived
    | SessionCommand
    | TranscriptAppended
    | ResetBoundary
    | CompactionImminent
    | SessionCreated
    | SessionForked
    | MemoryWriteRequested
    | RecordRequested
    | DocumentChanged
    | ErasureRequested
    | ErasureCompleted
    | IndexAdvanced
    | RecallPerformed
    | AgentConfigured,
    Field(discriminator="type"),
]

event_adapter: TypeAdapter[Event] = TypeAdapter(Event)


def decode_event(data: bytes | str) -> Event:
    """Decode any cairn event from JSON; raises `pydantic.ValidationError` for bad input."""
    return event_adapter.validate_json(data)


def encode_event(event: Event) -> bytes:
    return event_adapter.dump_json(event)


__all__ = ["AwareDatetime", "ChatType", "EventTime", "FreeText", "Name", "Role"]
