"""API keys: random, shown once, stored as a SHA-256 hash; a short prefix lets operators tell keys apart."""

import secrets
from dataclasses import dataclass

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
