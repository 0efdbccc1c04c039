"""The envelope every event carries: identity, tenant, agent, event time and record time, causality."""

from datetime import UTC, datetime
from typing import Annotated

import uuid_utils
from pydantic import BaseModel, ConfigDict, Field

from cairn.events.fields import INT32_MAX, EventTime, Name

# Tenant and agent ids become NATS subject tokens, so they must never contain dots, wildcards or spaces.
TOKEN_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
# A stream position as a client sends it back (`consistent_with`): 18 digits stay within Postgres bigint,
# where the projections keep positions (19 could pass it and fail the read).
POSITION_PATTERN = r"^[0-9]{1,18}$"
# The largest version of a document or an agent config: Postgres int, where they are kept.
MAX_VERSION = INT32_MAX
Token = Annotated[str, Field(pattern=TOKEN_PATTERN)]
# Tenant and event ids are UUIDs: the database keys them as uuid, so anything else is refused at decode
# time rather than failing every transaction until it is dead-lettered.
UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
Uuid = Annotated[str, Field(pattern=UUID_PATTERN)]


# The name earlier modules import: event time is `cairn.events.fields.EventTime`.
AwareDatetime = EventTime


def new_event_id() -> str:
    """A UUIDv7: time-ordered, so ids sort roughly by creation."""
    return str(uuid_utils.uuid7())


def utc_now() -> datetime:
    return datetime.now(UTC)


class Envelope(BaseModel):
    """Fields shared by every event. `occurred_at` is event time, `recorded_at` ingest time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_id: Uuid = Field(default_factory=new_event_id)
    tenant_id: Uuid
    agent_id: Token = "main"
    occurred_at: EventTime = Field(default_factory=utc_now)
    recorded_at: EventTime = Field(default_factory=utc_now)
    causation_id: Name | None = None
    correlation_id: Name | None = None
