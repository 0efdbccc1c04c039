"""Whose recall this is and where it may look (issue 29, "Eligibility" and "Whose conversations").

`eligibility` says whether a message gets recall at all; `person_of` says whose a session is, from its key
(DESIGN §5 key shapes) and the agent's identity links and `owner_peers`; `same_person_sessions` lists the
other direct conversations of that person, the only transcripts recall may reach. A session that is not
someone's direct conversation (groups, channels, cron, heartbeat, hooks, sub-agents, incognito) has no
person: it is never a source, and never sees one.
"""

import re
from dataclasses import dataclass
from typing import Any, Final

from cairn.events import ActiveMemory, AgentConfig
from cairn.events.routing import ActiveMemoryCommand, active_memory_command, is_incognito
from cairn.memindex.transcripts import UNATTENDED_CHANNELS

__all__ = [
    "OWNER",
    "ActiveMemoryCommand",
    "SessionFacts",
    "active_memory_command",
    "chat_ids_of",
    "eligibility",
    "person_of",
    "recalls_across_conversations",
    "same_person_sessions",
    "session_facts",
]

# The agent's owner, as `person_of` names them: never a linked person's name (no colons) nor a peer address
# (its channel part is never empty), so no peer id can ever pass for the owner.
OWNER: Final = ":owner"

FIND_FACTS = """
SELECT session_id::text, chat_type, channel, active_memory FROM session.sessions
WHERE tenant_id = $1 AND agent_id = $2 AND session_key = $3
"""
# The agent's direct sessions whose last key segment (before a thread suffix) may name the person ($4), and its
# dashboard threads when the person is the owner ($5); `person_of` then decides each exactly. Incognito threads
# have no row; the filter keeps them out should one ever get one. It reads every session row of the agent (about
# 100 ms at 100k sessions): an expression index on the segment would spare that, at one more index write per
# session update on the ingest path, for a lookup only lane 2 (which waits seconds for a model) makes.
CANDIDATE_SESSIONS = """
SELECT session_key, channel FROM session.sessions
WHERE tenant_id = $1 AND agent_id = $2 AND session_key <> $3 AND chat_type = 'direct'
  AND (split_part(regexp_replace(session_key, ':thread:[^:]*$', ''), ':', -1) = ANY($4::text[])
       OR ($5 AND split_part(session_key, ':', 3) = 'dashboard'))
  AND strpos(session_key, 'incognito-') = 0
ORDER BY updated_at DESC, session_key
"""

_THREAD = re.compile(r":thread:[^:]*$")
_RESET_COMMANDS = ("/new", "/reset")


@dataclass(frozen=True)
class SessionFacts:
    """What recall needs to know of a session; `session_id` None for one not stored yet (its first message)."""

    session_key: str
    session_id: str | None
    chat_type: str | None
    channel: str | None
    active_memory: bool  # False once `/active-memory off` was sent in that session

    @classmethod
    def unstored(cls, session_key: str, chat_type: str | None = None, channel: str | None = None) -> "SessionFacts":
        """A session the session service has not stored (yet): what the request says, recall on."""
        return cls(session_key, None, chat_type, channel, True)


async def session_facts(conn: Any, tenant: str, agent: str, session_key: str) -> SessionFacts | None:
    """The stored facts of a session, None when there is no such session. `conn`: a tenant transaction's."""
    row = await conn.fetchrow(FIND_FACTS, tenant, agent, session_key)
    if row is None:
        return None
    return SessionFacts(session_key, row["session_id"], row["chat_type"], row["channel"], row["active_memory"])


def recalls_across_conversations(config: AgentConfig) -> bool:
    """`remember_across_conversations` as recall reads it: null (the default) is on. The transcript index
    (`cairn.memindex.transcripts.remembers`) reads null as on only when dm_scope is main."""
    return config.remember_across_conversations is not False


def _is_command(text: str) -> bool:
    head = text.split(maxsplit=1)[0].lower() if text.strip() else ""
    return head in _RESET_COMMANDS or active_memory_command(text) is not None


def _key_reason(session_key: str) -> str | None:
    """Why a key is not a persistent interactive conversation's, if it is not."""
    parts = session_key.split(":")
    if is_incognito(session_key):
        return "incognito session"
    if parts[0] == "cron":
        return "cron session"
    if parts[0] == "heartbeat":
        return "heartbeat"
    if parts[0] in ("hook", "hooks"):
        return "hook session"
    if "subagent" in parts:  # OpenClaw's `agent:<agent>:subagent:<id>`, as the transcript index reads it
        return "sub-agent session"
    return None


def _channel_reason(channel: str | None) -> str | None:
    """Why a message on this channel has nobody waiting for the reply (the channels the transcript index skips)."""
    if channel == "cron":
        return "cron session"
    if channel == "heartbeat":
        return "heartbeat"
    if channel in UNATTENDED_CHANNELS:
        return "hook session"
    return None


def eligibility(
    facts: SessionFacts, config: ActiveMemory, *, text: str, role: str = "user", channel: str | None = None
) -> str | None:
    """None when the message gets recall; else why not, in the user's terms. Deny wins over every allow.
    `channel`: the message's, when the caller knows it (a heartbeat can arrive in the main session); else the
    session's."""
    if role != "user":
        return "not a user message"
    if not text.strip():
        return "empty message"
    if _is_command(text):
        return "a session command, not a message"
    reason = _key_reason(facts.session_key) or _channel_reason(channel or facts.channel)
    if reason is not None:
        return reason
    if not facts.active_memory:
        return "active memory is off for this session"
    ids = chat_ids_of(facts.session_key, facts.channel)
    if ids & set(config.denied_chat_ids):
        return "chat id denied"
    chat_type = facts.chat_type or "direct"
    if chat_type not in config.allowed_chat_types:
        return f"chat type {chat_type} is not allowed"
    if config.allowed_chat_ids and not ids & set(config.allowed_chat_ids):
        return "chat id is not in allowed_chat_ids"
    return None


def chat_ids_of(session_key: str, channel: str | None) -> frozenset[str]:
    """Every name `allowed_chat_ids`/`denied_chat_ids` may give a session's chat: its key (and the key without a
    thread suffix), and for a group, channel or direct chat its id alone and as `<channel>:<id>`."""
    base = _THREAD.sub("", session_key)
    names = {session_key, base}
    parts = base.split(":")
    for marker in ("group", "channel", "direct"):
        if marker in parts[2:-1]:
            at = parts.index(marker, 2)
            chat = parts[at + 1]
            chat_channel = parts[2] if at > 2 else channel
            names.add(chat)
            if chat_channel:
                names.add(f"{chat_channel}:{chat}")
            break
    return frozenset(names)


def _owner_people(config: AgentConfig) -> frozenset[str]:
    """Linked people one of whose peers is an owner peer: the owner under another name."""
    owned = set(config.owner_peers)
    return frozenset(person for person, peers in config.identity_links.items() if owned.intersection(peers))


def _person_of_peer(peer: str, channel: str | None, config: AgentConfig) -> str:
    """A direct chat's peer segment (a linked person's name, or a peer id) as a person."""
    if peer in config.identity_links:
        return OWNER if peer in _owner_people(config) else peer
    if channel is None:
        return peer  # a per-peer key of an unlinked peer whose channel is unknown: the bare id
    address = f"{channel}:{peer}"
    if address in config.owner_peers:
        return OWNER
    for person, peers in config.identity_links.items():  # linked after the session was keyed
        if address in peers:
            return OWNER if person in _owner_people(config) else person
    return address


def person_of(session_key: str, config: AgentConfig, channel: str | None = None) -> str | None:
    """Whose conversation a session is: `OWNER` (main session, dashboard threads, owner peers), a linked
    person's name, or a peer address (`telegram:123`; a bare id under per-peer when `channel` is not given).
    None: nobody's own conversation (group, channel, cron, heartbeat, hook, sub-agent, incognito), never a
    source. A DM thread (`…:direct:<peer>:thread:<id>`) is its chat's person; a group's thread is nobody's."""
    if _key_reason(session_key) is not None:
        return None
    parts = _THREAD.sub("", session_key).split(":")
    if len(parts) < 3 or parts[0] != "agent":
        return None
    rest = parts[2:]
    if rest == ["main"] or (len(rest) == 2 and rest[0] == "dashboard"):
        return OWNER
    if len(rest) == 2 and rest[0] == "direct":  # per-peer
        return _person_of_peer(rest[1], channel, config)
    if len(rest) in (3, 4) and rest[-2] == "direct":  # per-channel-peer, per-account-channel-peer
        return _person_of_peer(rest[-1], rest[0], config)
    return None


def _segments_naming(person: str, config: AgentConfig) -> list[str]:
    """The last key segments a direct session of `person` can have: the person's name and their peer ids."""
    if person == OWNER:
        people = _owner_people(config)
        addresses = {*config.owner_peers, *(p for name in people for p in config.identity_links[name])}
        return sorted({"main", *people, *(address.split(":", 1)[1] for address in addresses)})
    addresses = set(config.identity_links.get(person, ()))
    if ":" in person:
        addresses.add(person)
    return sorted({person, *(address.split(":", 1)[1] for address in addresses)})


async def same_person_sessions(conn: Any, tenant: str, agent: str, session_key: str, config: AgentConfig) -> list[str]:
    """The keys of the agent's other direct sessions of the same person as `session_key` (recently updated
    first; the session itself never), or none when the agent does not recall across conversations or the
    session is nobody's own. Each session is read with its stored channel, which places a per-peer peer."""
    facts = await session_facts(conn, tenant, agent, session_key)
    person = person_of(session_key, config, facts.channel if facts else None)
    if person is None or not recalls_across_conversations(config):
        return []
    rows = await conn.fetch(
        CANDIDATE_SESSIONS, tenant, agent, session_key, _segments_naming(person, config), person == OWNER
    )
    return [row["session_key"] for row in rows if person_of(row["session_key"], config, row["channel"]) == person]
