"""Pure rules of the write door: API keys (random, shown once, stored as a SHA-256 hash, a short prefix lets
operators tell keys apart), message limits, session keys of console threads, dedup ids."""

import re
import secrets
import uuid
from dataclasses import dataclass

from cairn.edge.auth import hash_key
from cairn.events import InboundMessage, MessageReceived, utc_now
from cairn.events.models import MAX_TEXT_CHARS
from cairn.events.routing import RoutingConfig, session_key_for

KEY_PREFIX = "ck_"
# At most 512 characters, none of them whitespace or control characters (keys are printed, logged, pasted).
SESSION_KEY_PATTERN = r"^[^\s\x00-\x1f\x7f]{1,512}$"


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


@dataclass(frozen=True)
class Refusal:
    """Why a message that passed the model's validation is still not accepted, and the field to blame."""

    status: int
    field: str
    message: str


def text_too_large(byte_size: int, char_size: int, max_bytes: int) -> str:
    if byte_size > max_bytes:
        return f"text is {byte_size} bytes in UTF-8; the limit is {max_bytes} bytes"
    return f"text is {char_size} characters; the limit is {MAX_TEXT_CHARS} characters"


def session_key_problem(key: str) -> str | None:
    if re.fullmatch(SESSION_KEY_PATTERN, key):
        return None
    if len(key) > 512:
        return f"session_key is {len(key)} characters; the limit is 512"
    return "session_key must not contain whitespace or control characters"


def refusal(message: InboundMessage, max_text_bytes: int) -> Refusal | None:
    """413 for a text over the configured size (UTF-8 bytes), 422 for a malformed explicit session key."""
    size = len(message.text.encode())
    if size > max_text_bytes:
        return Refusal(413, "text", text_too_large(size, len(message.text), max_text_bytes))
    problem = session_key_problem(message.session_key) if message.session_key is not None else None
    return Refusal(422, "session_key", problem) if problem else None


def console_thread_key(agent_id: str) -> str:
    """A new console thread's key (`agent:<agent>:dashboard:<uuid>`), for created and forked sessions alike."""
    return f"agent:{agent_id}:dashboard:{uuid.uuid4()}"
