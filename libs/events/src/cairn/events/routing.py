"""Session keys: which conversation bucket a message belongs to (DESIGN §5 "Sessions").

Shared by ingest (which answers with the key) and session (which appends under it); pure functions.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from cairn.events.agents import AgentConfig, DmScope
from cairn.events.models import InboundMessage

__all__ = [
    "DmScope",
    "RoutingConfig",
    "RoutingError",
    "canonical_peer",
    "is_reset_command",
    "routing_config",
    "session_key_for",
]


class RoutingError(ValueError):
    """The message lacks what its chat type and scope need to be routed; `field` names what is missing."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class RoutingConfig:
    dm_scope: DmScope = "main"
    # canonical person -> channel peers ("telegram:123"); ignored under dm_scope=main
    identity_links: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def routing_config(config: AgentConfig) -> RoutingConfig:
    """What routing needs of an agent's settings."""
    return RoutingConfig(config.dm_scope, dict(config.identity_links))


def canonical_peer(channel: str, peer_id: str, links: Mapping[str, tuple[str, ...]]) -> str:
    address = f"{channel}:{peer_id}"
    for person, peers in links.items():
        if address in peers:
            return person
    return peer_id


def _direct_key(msg: InboundMessage, config: RoutingConfig) -> str:
    agent = msg.agent_id
    if config.dm_scope == "main":
        return f"agent:{agent}:main"
    if not msg.peer_id:
        raise RoutingError("peer_id", f"peer_id is required for direct messages when dm_scope is {config.dm_scope}")
    peer = canonical_peer(msg.channel, msg.peer_id, config.identity_links)
    if config.dm_scope == "per-peer":
        return f"agent:{agent}:direct:{peer}"
    if config.dm_scope == "per-channel-peer":
        return f"agent:{agent}:{msg.channel}:direct:{peer}"
    account = msg.account_id or "default"
    return f"agent:{agent}:{msg.channel}:{account}:direct:{peer}"


def session_key_for(msg: InboundMessage, config: RoutingConfig) -> str:
    """The key a message routes to; an explicit `session_key` always wins."""
    if msg.session_key:
        return msg.session_key
    if msg.chat_type == "direct":
        key = _direct_key(msg, config)
    else:
        if not msg.chat_id:
            raise RoutingError("chat_id", f"chat_id is required for {msg.chat_type} messages")
        key = f"agent:{msg.agent_id}:{msg.channel}:{msg.chat_type}:{msg.chat_id}"
    return f"{key}:thread:{msg.thread_id}" if msg.thread_id else key


def is_reset_command(msg: InboundMessage) -> Literal["new", "reset"] | None:
    """`/new` or `/reset` from a user resets the session instead of being stored."""
    if msg.role != "user":
        return None
    head = msg.text.strip().split(maxsplit=1)[0].lower() if msg.text.strip() else ""
    if head in ("/new", "/reset"):
        return "new" if head == "/new" else "reset"
    return None
