"""An agent's settings: the body of `PUT /v1/agents/{agent_id}/config` and the payload of `agent.configured`.

Omitted fields take their defaults, so a stored or announced config is always complete (the effective
config); `null` where it appears means "the deployment's default" and is kept as such.
"""

from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

DmScope = Literal["main", "per-peer", "per-channel-peer", "per-account-channel-peer"]
Visibility = Literal["self", "tree", "agent", "all"]
ResetMode = Literal["none", "daily", "idle"]

# A person becomes a session-key segment (`agent:main:direct:alice`): no colons, no whitespace.
Person = Annotated[str, Field(pattern=r"^[^\s:]{1,128}$")]
# A channel peer as `<channel>:<peer id>`, e.g. `telegram:123`.
PeerAddress = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}:\S{1,256}$")]


def _known_zone(name: str) -> str:
    if name == "UTC":  # valid even on a host without a time-zone database
        return name
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise ValueError(f"unknown time zone {name!r}: use an IANA name such as 'Europe/Berlin'") from error
    return name


TimeZone = Annotated[str, Field(min_length=1, max_length=64), AfterValidator(_known_zone)]


class ResetPolicy(BaseModel):
    """When a session starts a fresh window by itself: never, daily at an hour, or after idle minutes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: ResetMode = "none"
    at_hour: int = Field(default=4, ge=0, le=23, description="local hour of the daily reset")
    idle_minutes: int = Field(default=60, ge=1, description="inactivity before an idle reset")
    timezone: TimeZone = Field(default="UTC", description="IANA time zone the daily hour is read in")


class AgentConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    dm_scope: DmScope = "main"
    identity_links: dict[Person, tuple[PeerAddress, ...]] = Field(
        default_factory=dict, description='person -> channel peers ("telegram:123"); ignored when dm_scope is main'
    )
    reset: ResetPolicy = Field(default_factory=ResetPolicy)
    context_window: int | None = Field(
        default=None, ge=1000, description="tokens; null = the deployment's default (CAIRN_SESSION_CONTEXT_WINDOW)"
    )
    sessions_visibility: Visibility = "tree"
    remember_across_conversations: bool | None = Field(
        default=None, description="null = on when dm_scope is main, off otherwise"
    )

    @field_validator("identity_links")
    @classmethod
    def _one_person_per_peer(cls, links: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        """A peer linked to two people would route by dictionary order: refuse the ambiguity."""
        owner: dict[str, str] = {}
        for person, peers in links.items():
            for peer in peers:
                if owner.setdefault(peer, person) != person:
                    raise ValueError(f"{peer} is linked to both {owner[peer]} and {person}")
        return links
