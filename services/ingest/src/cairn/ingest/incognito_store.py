"""Incognito threads (DESIGN §5): transcripts held in memory only, in Redis.

Why Redis: it is the stack's shared ephemeral state and runs without persistence everywhere (no RDB
snapshots, no append-only file: the local stack, docker-compose and k8s alike), so a thread never
touches a disk, JetStream or Postgres, and ends with a Redis restart. Every ingest replica writes and
every recall replica reads the same thread, with no replica owning it (a core-NATS request to a session
replica would lose threads whenever partitions move). Entries expire after the thread's last write
(`ttl_s`) and a thread holds at most `max_entries`, so forgotten threads cannot fill memory.

A thread is three keys sharing one hash tag: `meta` (session id, parent, last position, reset index),
`log` (entries in order, each `<position>:<reset index>:<json>`) and `ids` (adapter message ids, the
idempotency keys; see `cairn.events.incognito`). One Lua script appends, so positions are gap-free across replicas.
"""

from dataclasses import dataclass

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from redis.asyncio import Redis

from cairn.events.incognito import IncognitoEntry, thread_keys


class IncognitoSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_INCOGNITO_", extra="ignore")

    ttl_s: int = Field(default=24 * 3600, ge=60, description="an incognito thread ends this long after its last write")
    max_entries: int = Field(default=5000, ge=10, description="messages and resets one incognito thread may hold")


@dataclass(frozen=True)
class Appended:
    position: int
    message_id: str
    duplicate: bool


class ThreadGone(Exception):
    """No live incognito thread under this key: never created, expired, or Redis restarted."""


class ThreadFull(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"an incognito thread holds at most {limit} entries")
        self.limit = limit


# KEYS: meta, log, ids. ARGV: dedup field ('' for none), message id, entry json, kind, ttl ms, max entries.
# Returns {status, position, message id}: 1 appended, 0 a duplicate, -1 no thread, -2 full.
APPEND = """
if redis.call('exists', KEYS[1]) == 0 then return {-1, 0, ''} end
if ARGV[1] ~= '' then
  local seen = redis.call('hget', KEYS[3], ARGV[1])
  if seen then
    local sep = string.find(seen, ':', 1, true)
    return {0, tonumber(string.sub(seen, 1, sep - 1)), string.sub(seen, sep + 1)}
  end
end
if redis.call('llen', KEYS[2]) >= tonumber(ARGV[6]) then return {-2, 0, ''} end
local position = redis.call('hincrby', KEYS[1], 'last_position', 1)
local reset_index = tonumber(redis.call('hget', KEYS[1], 'reset_index'))
if ARGV[4] == 'reset' then reset_index = redis.call('hincrby', KEYS[1], 'reset_index', 1) end
redis.call('rpush', KEYS[2], position .. ':' .. reset_index .. ':' .. ARGV[3])
if ARGV[1] ~= '' then redis.call('hset', KEYS[3], ARGV[1], position .. ':' .. ARGV[2]) end
for i = 1, 3 do redis.call('pexpire', KEYS[i], ARGV[5]) end
return {1, position, ARGV[2]}
"""


# KEYS: meta. ARGV: session id, parent key ('' for none), ttl ms.
CREATE = """
redis.call('hset', KEYS[1], 'session_id', ARGV[1], 'parent', ARGV[2], 'last_position', 0, 'reset_index', 0)
redis.call('pexpire', KEYS[1], ARGV[3])
return 1
"""


class IncognitoThreads:
    def __init__(self, redis: "Redis", settings: IncognitoSettings) -> None:
        self._redis, self._settings = redis, settings

    async def create(
        self, tenant: str, agent: str, session_key: str, session_id: str, parent_session_key: str | None
    ) -> None:
        meta, _, _ = thread_keys(tenant, agent, session_key)
        await self._redis.eval(CREATE, 1, meta, session_id, parent_session_key or "", self._settings.ttl_s * 1000)

    async def append(self, tenant: str, agent: str, session_key: str, entry: IncognitoEntry) -> Appended:
        """Append at the next position; an entry whose adapter id is already there is not stored again."""
        dedup = f"{entry.channel}\x1f{entry.external_id}" if entry.external_id else ""
        status, position, message_id = await self._redis.eval(
            APPEND, 3, *thread_keys(tenant, agent, session_key), dedup, entry.message_id, entry.model_dump_json(),
            entry.kind, self._settings.ttl_s * 1000, self._settings.max_entries,
        )  # fmt: skip
        if status == -1:
            raise ThreadGone(session_key)
        if status == -2:
            raise ThreadFull(self._settings.max_entries)
        mid = message_id.decode() if isinstance(message_id, bytes) else str(message_id)
        return Appended(int(position), mid, duplicate=status == 0)

    async def is_live(self, tenant: str, agent: str, session_key: str) -> bool:
        meta, _, _ = thread_keys(tenant, agent, session_key)
        return bool(await self._redis.exists(meta))
