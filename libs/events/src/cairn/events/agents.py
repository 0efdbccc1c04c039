"""An agent's settings: the body of `PUT /v1/agents/{agent_id}/config` and the payload of `agent.configured`.

Omitted fields take their defaults, so a stored or announced config is always complete (the effective
config); `null` where it appears means "the deployment's default" and is kept as such.
"""

from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from cairn.events.fields import Integer, Name, checked_name, whole

# Defined here, not beside the events (`cairn.events.models` imports it from here): recall's settings name them.
ChatType = Literal["direct", "group", "channel"]
DmScope = Literal["main", "per-peer", "per-channel-peer", "per-account-channel-peer"]
# How group and channel chats map to sessions: one per chat (`group`), one per chat and bot account
# (`per-account`, for several bots in one group), or one per chat and member (`per-member`).
GroupScope = Literal["group", "per-account", "per-member"]
Visibility = Literal["self", "tree", "agent", "all"]
ResetMode = Literal["none", "daily", "idle"]
# What a reset policy can be given for: a chat type, or threads of any chat type (`thread` wins).
ResetKind = Literal["direct", "group", "channel", "thread"]

# A person becomes a session-key segment (`agent:main:direct:alice`): no colons, no whitespace. (Patterns before the
# name check, for the OpenAPI document to show them: see `cairn.events.fields`.)
Person = Annotated[str, Field(pattern=r"^[^\s:]{1,128}$"), AfterValidator(checked_name)]
# A channel peer as `<channel>:<peer id>`, e.g. `telegram:123`.
PeerAddress = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}:\S{1,256}$"), AfterValidator(checked_name)]

# Upper bounds of every number and collection: what the session service can store (context_window is an
# `int` column) and apply (minutes and days become timedeltas), and what `agent.configured` can carry
# whole in one NATS message (identity links are its only collection of unbounded size).
MAX_CONTEXT_WINDOW = 100_000_000  # tokens: fifty times the largest model window of 2026
MAX_TRANSCRIPT_BYTES = 1 << 30
MAX_IDLE_MINUTES = 366 * 24 * 60  # a year
MIN_RETENTION_DAYS = 1e-6  # 86.4 ms: stored as a microsecond interval, a smaller one would be zero
MAX_RETENTION_DAYS = 36_600.0  # a century
MAX_PEOPLE = 1_000
MAX_PEERS_PER_PERSON = 32
MAX_LINKED_PEERS = 2_000
MAX_LINKS_BYTES = 256 * 1024  # people and peers in UTF-8, well under NATS's 1 MiB message limit
MAX_OWNER_PEERS = 32  # as many addresses as one person may link
MAX_CHAT_IDS = 256  # per list: 256 ids of at most 256 characters stay far below NATS's message limit
MIN_RECALL_TIMEOUT_MS, MAX_RECALL_TIMEOUT_MS = 250, 120_000

# Recall's lane 2: after a weak lane 1 when the message seeks something told before (`escalate`), after any
# weak lane 1 (`always`), or never (`off`: lane 1 only).
ActiveMemoryMode = Literal["escalate", "always", "off"]
# What recall searches with: the message and the last turns (`recent`), the message alone, or the whole window.
QueryMode = Literal["recent", "message", "full"]
# A chat as `allowed_chat_ids`/`denied_chat_ids` name it: a session key, `<channel>:<chat or peer id>` or a bare id.
ChatId = Annotated[Name, Field(min_length=1, max_length=256)]

# The optional numbers' bounds, where the OpenAPI document shows them (see `cairn.events.fields.Integer`).
ContextWindow = Annotated[int, Field(ge=1000, le=MAX_CONTEXT_WINDOW), BeforeValidator(whole)]
Tokens = Annotated[int, Field(ge=0, le=MAX_CONTEXT_WINDOW), BeforeValidator(whole)]
TranscriptBytes = Annotated[int, Field(ge=1024, le=MAX_TRANSCRIPT_BYTES), BeforeValidator(whole)]


def _known_zone(name: str) -> str:
    if name == "UTC":  # valid even on a host without a time-zone database
        return name
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise ValueError(f"unknown time zone {name!r}: use an IANA name such as 'Europe/Berlin'") from error
    return name


TimeZone = Annotated[str, Field(min_length=1, max_length=64), AfterValidator(_known_zone)]


class _ResetRule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: ResetMode = "none"
    at_hour: Integer = Field(default=4, ge=0, le=23, description="local hour of the daily reset")
    idle_minutes: Integer = Field(default=60, ge=1, le=MAX_IDLE_MINUTES, description="inactivity before an idle reset")


class ResetPolicy(_ResetRule):
    """When a session starts a fresh window by itself: never, daily at an hour, or after idle minutes."""

    timezone: TimeZone = Field(default="UTC", description="IANA time zone the daily hour is read in")


class ResetOverride(_ResetRule):
    """The reset policy of one kind of session (`reset_by_type`); its zone defaults to the agent's."""

    timezone: TimeZone | None = Field(default=None, description="null: the time zone of the agent's `reset`")


class Retention(BaseModel):
    """How long a quiet session stays active, then dormant, before it is archived (nothing is deleted)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dormant_after_days: float | None = Field(
        default=None,
        ge=MIN_RETENTION_DAYS,
        le=MAX_RETENTION_DAYS,
        description="quiet days before dormant; null = the deployment's default",
    )
    archive_after_days: float | None = Field(
        default=None,
        ge=MIN_RETENTION_DAYS,
        le=MAX_RETENTION_DAYS,
        description="quiet days before archived; null = the deployment's default",
    )

    @model_validator(mode="after")
    def _archive_not_before_dormant(self) -> "Retention":
        dormant, archive = self.dormant_after_days, self.archive_after_days
        if dormant is not None and archive is not None and archive < dormant:
            raise ValueError(f"archive_after_days ({archive}) must not be less than dormant_after_days ({dormant})")
        return self


class CompactionPolicy(BaseModel):
    """When `session.compaction-imminent` fires: at `context_window - reserve_tokens - soft_threshold_tokens`
    estimated tokens of the live window, or at `max_transcript_bytes`; null = the deployment's default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reserve_tokens: Tokens | None = Field(default=None, description="tokens kept free for the reply")
    soft_threshold_tokens: Tokens | None = Field(default=None, description="headroom for the memory flush")
    max_transcript_bytes: TranscriptBytes | None = Field(default=None, description="live window size that also fires")


class ActiveMemory(BaseModel):
    """Recall before each reply (API.md `POST /v1/recall`): which sessions get it and how far it may go."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: ActiveMemoryMode = "escalate"
    query_mode: QueryMode = "recent"
    allowed_chat_types: tuple[ChatType, ...] = Field(
        default=("direct",), max_length=3, description="chat types recall runs in"
    )
    allowed_chat_ids: tuple[ChatId, ...] = Field(
        default=(), max_length=MAX_CHAT_IDS, description="when not empty, only these chats (of an allowed type)"
    )
    denied_chat_ids: tuple[ChatId, ...] = Field(
        default=(), max_length=MAX_CHAT_IDS, description="never these chats; wins over allowed_chat_ids"
    )
    timeout_ms: Integer = Field(
        default=15_000, ge=MIN_RECALL_TIMEOUT_MS, le=MAX_RECALL_TIMEOUT_MS, description="hard total deadline"
    )
    min_score: float = Field(default=0.65, ge=0.0, le=1.0, description="a lane-1 hit this strong is injected")


def _links_within_bounds(links: dict[str, tuple[str, ...]]) -> None:
    peers = sum(len(addresses) for addresses in links.values())
    if peers > MAX_LINKED_PEERS:
        raise ValueError(f"{peers} peers are linked; the limit is {MAX_LINKED_PEERS}")
    size = sum(len(person.encode()) + sum(len(a.encode()) for a in addresses) for person, addresses in links.items())
    if size > MAX_LINKS_BYTES:
        raise ValueError(f"people and peers take {size} bytes in UTF-8; the limit is {MAX_LINKS_BYTES}")


class AgentConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    dm_scope: DmScope = "main"
    identity_links: dict[Person, Annotated[tuple[PeerAddress, ...], Field(max_length=MAX_PEERS_PER_PERSON)]] = Field(
        default_factory=dict,
        max_length=MAX_PEOPLE,
        description='person -> channel peers ("telegram:123"); for direct messages ignored when dm_scope is main, '
        "and used by group_scope per-member",
    )
    group_scope: GroupScope = "group"
    reset: ResetPolicy = Field(default_factory=ResetPolicy)
    reset_by_type: dict[ResetKind, ResetOverride] = Field(
        default_factory=dict, description="a policy per chat type or for threads, in place of `reset`"
    )
    context_window: ContextWindow | None = Field(
        default=None, description="tokens; null = the deployment's default (CAIRN_SESSION_CONTEXT_WINDOW)"
    )
    compaction: CompactionPolicy = Field(default_factory=CompactionPolicy)
    sessions_visibility: Visibility = "tree"
    remember_across_conversations: bool | None = Field(
        default=None,
        description="null = the default: recall reaches the same person's other direct conversations; the "
        "transcript index joins memory search only when dm_scope is main",
    )
    retention: Retention = Field(default_factory=Retention)
    active_memory: ActiveMemory = Field(default_factory=ActiveMemory)
    owner_peers: tuple[PeerAddress, ...] = Field(
        default=(),
        max_length=MAX_OWNER_PEERS,
        description="the owner's own channel peers (\"telegram:123\"): their direct chats are the owner's, "
        "like the main session and dashboard threads",
    )

    @field_validator("identity_links")
    @classmethod
    def _one_person_per_peer(cls, links: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        """A peer linked to two people would route by dictionary order: refuse the ambiguity."""
        _links_within_bounds(links)
        owner: dict[str, str] = {}
        for person, peers in links.items():
            if person.startswith("incognito-"):
                raise ValueError(f"{person}: names starting with 'incognito-' are reserved for incognito threads")
            for peer in peers:
                if owner.setdefault(peer, person) != person:
                    raise ValueError(f"{peer} is linked to both {owner[peer]} and {person}")
        return links

    def reset_policies(self) -> dict[str, ResetPolicy]:
        """The per-kind policies as complete policies: an override without a zone takes `reset`'s."""
        return {
            kind: ResetPolicy(**{**rule.model_dump(), "timezone": rule.timezone or self.reset.timezone})
            for kind, rule in self.reset_by_type.items()
        }
