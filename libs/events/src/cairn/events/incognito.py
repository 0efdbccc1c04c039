"""How an incognito thread is laid out in Redis: the contract between its writer (ingest) and its reader
(recall). Why Redis, and how the thread is kept bounded, is said in `cairn.ingest.incognito_store`.

A thread is three keys sharing one hash tag: `meta` (session id, parent, last position, reset index),
`log` (entries in order, each `<position>:<reset index>:<json>`) and `ids` (adapter message ids, the
idempotency keys)."""

from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, ConfigDict


class IncognitoEntry(BaseModel):
    """A message or reset boundary of an incognito thread (position and window are kept beside it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str  # 'message' | 'reset'
    message_id: str
    channel: str
    external_id: str | None = None
    role: str | None = None
    text: str | None = None
    sender_name: str | None = None
    occurred_at: datetime
    recorded_at: datetime


@dataclass(frozen=True)
class StoredEntry:
    position: int
    reset_index: int
    entry: IncognitoEntry


@dataclass(frozen=True)
class IncognitoThread:
    session_key: str
    session_id: str
    parent_session_key: str | None
    reset_index: int
    entries: list[StoredEntry]


def thread_keys(tenant: str, agent: str, session_key: str) -> tuple[str, str, str]:
    base = f"cairn:incognito:{{{tenant}:{agent}:{session_key}}}"
    return f"{base}:meta", f"{base}:log", f"{base}:ids"


def stored_entry(raw: bytes) -> StoredEntry:
    position, reset_index, body = raw.decode().split(":", 2)
    return StoredEntry(int(position), int(reset_index), IncognitoEntry.model_validate_json(body))
