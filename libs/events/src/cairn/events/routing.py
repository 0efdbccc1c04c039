"""Session keys: which conversation bucket a message belongs to (DESIGN §5 "Sessions").

Shared by ingest (which answers with the key) and session (which appends under it); pure functions.
"""

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from cairn.events.agents import AgentConfig, DmScope, GroupScope
from cairn.events.models import InboundMessage

__all__ = [
    "ActiveMemoryCommand",
    "DmScope",
    "GroupScope",
    "RoutingConfig",
    "RoutingError",
    "active_memory_command",
    "canonical_peer",
    "incognito_thread_key",
    "is_active_memory_command",
    "is_incognito",
    "is_reset_command",
    "routing_config",
    "session_key_for",
]


# Incognito threads carry a segment starting with this prefix (DESIGN §5); it is reserved for them.
INCOGNITO_PREFIX = "incognito-"


def is_incognito(session_key: str) -> bool:
    """Whether a key addresses an incognito thread, which lives in memory only. Asked of every message by more than
    one service: keys without the prefix anywhere, nearly all of them, are answered without splitting."""
    if INCOGNITO_PREFIX not in session_key:
        return False
    return any(segment.startswith(INCOGNITO_PREFIX) for segment in session_key.split(":"))


def incognito_thread_key(agent_id: str) -> str:
    return f"agent:{agent_id}:dashboard:{INCOGNITO_PREFIX}{uuid.uuid4()}"


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
    group_scope: GroupScope = "group"


def routing_config(config: AgentConfig) -> RoutingConfig:
    """What routing needs of an agent's settings."""
    return RoutingConfig(config.dm_scope, dict(config.identity_links), config.group_scope)


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


def _group_key(msg: InboundMessage, config: RoutingConfig) -> str:
    """Group and channel chats: one session per chat, per chat and bot account, or per chat and member."""
    if not msg.chat_id:
        raise RoutingError("chat_id", f"chat_id is required for {msg.chat_type} messages")
    agent, chat = msg.agent_id, f"{msg.chat_type}:{msg.chat_id}"
    if config.group_scope == "group":
        return f"agent:{agent}:{msg.channel}:{chat}"
    if config.group_scope == "per-account":
        return f"agent:{agent}:{msg.channel}:{msg.account_id or 'default'}:{chat}"
    if not msg.peer_id:
        raise RoutingError(
            "peer_id", f"peer_id is required for {msg.chat_type} messages when group_scope is per-member"
        )
    member = canonical_peer(msg.channel, msg.peer_id, config.identity_links)
    return f"agent:{agent}:{msg.channel}:{chat}:member:{member}"


def session_key_for(msg: InboundMessage, config: RoutingConfig) -> str:
    """The key a message routes to; an explicit `session_key` always wins. A thread suffix comes last."""
    if msg.session_key:
        return msg.session_key
    _refuse_reserved_ids(msg)
    key = _direct_key(msg, config) if msg.chat_type == "direct" else _group_key(msg, config)
    return f"{key}:thread:{msg.thread_id}" if msg.thread_id else key


def _refuse_reserved_ids(msg: InboundMessage) -> None:
    """A derived key must never look incognito: it would be persisted, yet read as a memory-only thread."""
    for name in ("agent_id", "channel", "account_id", "peer_id", "chat_id", "thread_id"):
        value = getattr(msg, name)
        if value and any(part.startswith(INCOGNITO_PREFIX) for part in value.split(":")):
            raise RoutingError(name, f"{name} must not start with {INCOGNITO_PREFIX!r}: it marks incognito threads")


def is_reset_command(msg: InboundMessage) -> Literal["new", "reset"] | None:
    """`/new` or `/reset` from a user resets the session instead of being stored."""
    if msg.role != "user":
        return None
    head = msg.text.strip().split(maxsplit=1)[0].lower() if msg.text.strip() else ""
    if head in ("/new", "/reset"):
        return "new" if head == "/new" else "reset"
    return None


ActiveMemoryCommand = Literal["on", "off", "status"]
_ACTIVE_MEMORY = "/active-memory"
_ACTIVE_MEMORY_ARGUMENTS: dict[str, ActiveMemoryCommand] = {"": "status", "status": "status", "on": "on", "off": "off"}


def active_memory_command(text: str) -> ActiveMemoryCommand | None:
    """`/active-memory [on|off|status]` exactly (any case, any surrounding or separating whitespace; alone it is
    `status`). Anything else, `/active-memory offline` or `/active-memory off please` included, is an ordinary
    message: the runtime sees it and can explain the command, and a flag never changes on a guess."""
    words = text.split()
    if not words or words[0].lower() != _ACTIVE_MEMORY or len(words) > 2:
        return None
    return _ACTIVE_MEMORY_ARGUMENTS.get(words[1].lower() if len(words) == 2 else "")


def is_active_memory_command(msg: InboundMessage) -> ActiveMemoryCommand | None:
    """A user's `/active-memory` command turns recall on or off for its session instead of being stored."""
    return active_memory_command(msg.text) if msg.role == "user" else None
