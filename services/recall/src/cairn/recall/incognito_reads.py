"""History reads of an incognito thread: the same questions `HistoryReads` answers from Postgres,
answered from the thread as the in-memory store holds it (`cairn.platform.incognito`), read once per
request so that one page sees one consistent thread."""

import uuid
from collections.abc import Sequence

from cairn.platform.incognito import IncognitoThread, StoredEntry
from cairn.recall.history import StoredMessage
from cairn.recall.history_queries import SessionHead


class IncognitoReads:
    def __init__(self, thread: IncognitoThread | None) -> None:
        self._thread = thread

    async def session(self, agent: str, key: str) -> SessionHead | None:
        thread = self._thread
        return SessionHead(thread.session_id, thread.reset_index) if thread is not None else None

    async def earlier_session(self, agent: str, key: str, session_id: uuid.UUID) -> SessionHead | None:
        return None  # an incognito thread never changes its id: it has no daily or idle resets

    def _messages(self, roles: Sequence[str]) -> list[StoredEntry]:
        entries = self._thread.entries if self._thread is not None else []
        return [e for e in entries if e.entry.kind == "message" and e.entry.role in roles]

    async def anchor_window(self, session_id: str, message_id: str) -> int | None:
        entries = self._thread.entries if self._thread is not None else []
        return next(
            (e.reset_index for e in entries if message_id in (e.entry.message_id, e.entry.external_id)),
            None,
        )

    async def has_earlier_windows(self, session_id: str, window: int, roles: Sequence[str]) -> bool:
        return any(e.reset_index < window for e in self._messages(roles))

    async def newest_messages(
        self, session_id: str, window: int, roles: Sequence[str], limit: int, offset: int
    ) -> list[StoredMessage]:
        newest_first = [e for e in reversed(self._messages(roles)) if e.reset_index == window]
        return [
            StoredMessage(
                e.entry.message_id, e.entry.role or "", e.entry.sender_name, e.entry.text or "", e.entry.occurred_at,
                e.entry.recorded_at, e.position,
            )
            for e in newest_first[offset : offset + limit]
        ]  # fmt: skip
