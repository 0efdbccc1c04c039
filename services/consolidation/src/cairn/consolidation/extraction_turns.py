"""Which transcript turns model extraction reads, and what of them it keeps while they wait for their batch:
pure. A person's own direct conversation and group conversations are read (a group member's words are
untrusted); incognito threads, cron jobs, heartbeats, hooks and sub-agents never are."""

import json
from dataclasses import dataclass
from datetime import datetime

from cairn.consolidation.candidates import Origin
from cairn.events import TranscriptAppended
from cairn.events.routing import is_incognito
from cairn.text import redact

ROLES = ("user", "assistant")
UNATTENDED_KEYS = ("cron", "hook", "hooks", "heartbeat")
UNATTENDED_CHANNELS = frozenset({"cron", "heartbeat", "hook", "hooks"})


@dataclass(frozen=True)
class Turn:
    """A turn as a batch keeps it in Redis (JSON) until the batch is extracted."""

    message_id: str
    position: int
    role: str
    text: str
    occurred_at: datetime
    session_key: str
    session_id: str
    chat_type: str
    sender_name: str | None = None

    @property
    def origin(self) -> Origin:
        """The assistant's words are the agent's; a user's are the owner's in a direct conversation and
        untrusted in a group or channel, where anyone may speak."""
        if self.role == "assistant":
            return "agent"
        return "owner" if self.chat_type == "direct" else "untrusted"

    def dumps(self) -> str:
        """By hand rather than `asdict`, which copies deeply and costs more than the rest of a turn's way."""
        return json.dumps(
            {
                "message_id": self.message_id, "position": self.position, "role": self.role, "text": self.text,
                "occurred_at": self.occurred_at.isoformat(), "session_key": self.session_key,
                "session_id": self.session_id, "chat_type": self.chat_type, "sender_name": self.sender_name,
            },
            ensure_ascii=False,
        )  # fmt: skip

    @classmethod
    def loads(cls, raw: str | bytes) -> "Turn":
        data = json.loads(raw)
        return cls(**{**data, "occurred_at": datetime.fromisoformat(data["occurred_at"])})


def is_extracted_session(session_key: str, channel: str) -> bool:
    parts = session_key.split(":")
    return (
        not is_incognito(session_key)
        and "incognito-" not in session_key
        and parts[0] not in UNATTENDED_KEYS
        and "subagent" not in parts
        and channel not in UNATTENDED_CHANNELS
    )


def extractable(event: TranscriptAppended) -> bool:
    """A user or assistant message with words, not a command, in a session extraction may read."""
    text = event.text.strip()
    return (
        event.role in ROLES
        and bool(text)
        and not text.startswith("/")
        and is_extracted_session(event.session_key, event.channel)
    )


def turn_of(event: TranscriptAppended, max_chars: int) -> Turn:
    """Redacted (API keys, tokens, card numbers…): neither Redis, the model nor a memory record gets a secret."""
    return Turn(
        message_id=event.message_id,
        position=event.position,
        role=event.role,
        text=redact(event.text[:max_chars]),
        occurred_at=event.occurred_at,
        session_key=event.session_key,
        session_id=event.session_id,
        chat_type=event.chat_type,
        sender_name=event.sender_name,
    )
