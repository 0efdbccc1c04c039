"""API keys: random, shown once, stored as a SHA-256 hash; a short prefix lets operators tell keys apart."""

import secrets
from dataclasses import dataclass

from cairn.events import InboundMessage, MessageReceived, utc_now
from cairn.events.routing import RoutingConfig, session_key_for
from cairn.platform.auth import hash_key

KEY_PREFIX = "ck_"


@dataclass(frozen=True)
class NewKey:
    secret: str
    digest: bytes
    prefix: str


def new_api_key() -> NewKey:
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    return NewKey(secret, hash_key(secret), secret[:10])


def message_dedup_id(tenant_id: str, channel: str, message_id: str) -> str:
    """Same tenant + channel + adapter message id = the same message (JetStream's `Nats-Msg-Id`)."""
    return f"{tenant_id}:{channel}:{message_id}"


def received(tenant_id: str, message: InboundMessage, config: RoutingConfig) -> MessageReceived:
    """The event for an accepted message; raises `RoutingError` when it cannot be routed."""
    return MessageReceived(
        tenant_id=tenant_id,
        agent_id=message.agent_id,
        occurred_at=message.occurred_at or utc_now(),
        session_key=session_key_for(message, config),
        message=message,
    )


def dedup_ids(events: list[MessageReceived]) -> list[str | None]:
    return [
        message_dedup_id(e.tenant_id, e.message.channel, e.message.message_id) if e.message.message_id else None
        for e in events
    ]
