"""The flush worker's reads and writes: due flushes (consolidation.flushes_due), the transcript window a flush
reads (session.entries, the session service's) and the agent's time zone (ingest.agent_configs, ingest's), in
the claiming transaction of one tenant. Reads of other owners' tables go through cairn_app's grants, as
recall's do."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cairn.consolidation.flush import Line

# Every tenant's due flushes, oldest first (schema/R__due_flushes.sql): each is then claimed in its tenant's
# transaction.
DUE_FLUSHES = "SELECT tenant_id::text, session_id::text, reset_index, cycle FROM consolidation.due_flushes($1)"
# SKIP LOCKED: a flush another replica is doing (its transaction holds the row for the model call) is left to it;
# it is due again only if that replica dies without recording it done.
CLAIM_FLUSH = """
SELECT agent_id, session_key, up_to_position, forced, failures FROM consolidation.flushes_due
WHERE tenant_id = $1 AND session_id = $2 AND reset_index = $3 AND cycle = $4
  AND done_at IS NULL AND next_attempt_at <= now()
FOR UPDATE SKIP LOCKED
"""
# The window starts after what the previous cycle of the same window flushed: each message is read by one flush.
WINDOW_START = """
SELECT coalesce(max(up_to_position), 0) FROM consolidation.flushes_due
WHERE tenant_id = $1 AND session_id = $2 AND reset_index = $3 AND cycle < $4
"""
# An event from before the snapshot fields: the window as it is now.
WINDOW_END = "SELECT last_position FROM session.sessions WHERE tenant_id = $1 AND session_id = $2"
# Newest first, so a window longer than the bound keeps its end; the caller puts it back in order. Heartbeat and
# cron messages are nobody's words: not flushed.
WINDOW = """
SELECT role, text, occurred_at FROM session.entries
WHERE tenant_id = $1 AND session_id = $2 AND reset_index = $3 AND kind = 'message'
  AND position > $4 AND position <= $5 AND channel NOT IN ('heartbeat', 'cron')
ORDER BY position DESC LIMIT $6
"""
TIMEZONE = "SELECT config->'reset'->>'timezone' FROM ingest.agent_configs WHERE tenant_id = $1 AND agent_id = $2"
# With no model, a flush looks again after `$6` seconds or as long as it has waited so far, at most an hour: a
# deployment without a model, whose due flushes pile up, rechecks each of them ever more rarely.
WAIT_FOR_MODEL = """
UPDATE consolidation.flushes_due SET last_error = $5,
    next_attempt_at = now() + greatest(make_interval(secs => $6), least(now() - requested_at, interval '1 hour'))
WHERE tenant_id = $1 AND session_id = $2 AND reset_index = $3 AND cycle = $4
"""
FAILED = """
UPDATE consolidation.flushes_due SET attempts = attempts + 1, failures = failures + 1, last_error = $5,
    last_attempt_at = now(), next_attempt_at = now() + make_interval(secs => $6)
WHERE tenant_id = $1 AND session_id = $2 AND reset_index = $3 AND cycle = $4
"""
DONE = """
UPDATE consolidation.flushes_due SET attempts = attempts + 1, done_at = now(), last_attempt_at = now(),
    up_to_position = $5, daily_path = $6, notes_chars = $7, refused = $8, last_error = $9
WHERE tenant_id = $1 AND session_id = $2 AND reset_index = $3 AND cycle = $4
"""
MAX_LINES = 400  # messages of one window read, at most (the prompt keeps the newest WINDOW_CHARS of them)


@dataclass(frozen=True)
class DueFlush:
    tenant_id: str
    session_id: str
    reset_index: int
    cycle: int

    def key(self) -> tuple[str, str, int, int]:
        return (self.tenant_id, self.session_id, self.reset_index, self.cycle)


@dataclass(frozen=True)
class Claimed:
    agent_id: str
    session_key: str
    up_to_position: int | None
    forced: bool
    failures: int  # of this flush so far: how long the next wait is after another


@dataclass(frozen=True)
class Window:
    lines: list[Line]
    up_to_position: int
    timezone: str | None

    @property
    def last_at(self) -> datetime | None:
        return self.lines[-1].occurred_at if self.lines else None


class FlushStore:
    """Wraps the connection of one tenant transaction, the one holding the claimed flush."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def claim(self, due: DueFlush) -> Claimed | None:
        row = await self._conn.fetchrow(CLAIM_FLUSH, *due.key())
        if row is None:
            return None
        return Claimed(row["agent_id"], row["session_key"], row["up_to_position"], row["forced"], row["failures"])

    async def window(self, due: DueFlush, claimed: Claimed) -> Window:
        start = await self._conn.fetchval(WINDOW_START, *due.key())
        end = claimed.up_to_position
        if end is None:
            end = await self._conn.fetchval(WINDOW_END, due.tenant_id, due.session_id) or 0
        rows = await self._conn.fetch(WINDOW, due.tenant_id, due.session_id, due.reset_index, start, end, MAX_LINES)
        timezone = await self._conn.fetchval(TIMEZONE, due.tenant_id, claimed.agent_id)
        lines = [Line(r["role"], r["text"] or "", r["occurred_at"]) for r in reversed(rows)]
        return Window(lines, end, timezone)

    async def wait_for_model(self, due: DueFlush, reason: str, recheck_s: float) -> None:
        await self._conn.execute(WAIT_FOR_MODEL, *due.key(), reason, recheck_s)

    async def failed(self, due: DueFlush, error: str, retry_in_s: float) -> None:
        await self._conn.execute(FAILED, *due.key(), error, retry_in_s)

    async def done(
        self, due: DueFlush, window: Window, path: str | None, notes_chars: int, refused: tuple[str, ...]
    ) -> None:
        problem = "; ".join(refused) or None
        await self._conn.execute(DONE, *due.key(), window.up_to_position, path, notes_chars, len(refused), problem)
