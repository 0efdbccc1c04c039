"""The debounce state of extraction in Redis, shared by every replica: each session's turns waiting for their
batch, when the batch is due, who holds it, and the hourly count of model calls.

Per batch (one session of one agent, `<tenant>/<agent>/<session id>`): a hash of its turns by position (a
redelivered turn is the same field: added once), a meta hash (first turn's time, hold, attempts), a lease, the
last position extracted (a turn redelivered after its batch is not added again), and its due time in one sorted
set. A turn's arrival makes the batch due `debounce_s` later, but never later than
`max_wait_s` after its first turn, and at once when it holds `max_batch_turns`. A replica claims a due batch
with a lease; a replica killed while it holds one loses nothing: the lease runs out and another takes it.
Every change is one Lua script, so replicas never see half of one. Losing Redis loses the waiting batches,
not memory: the turns are in the transcript."""

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from cairn.consolidation.extraction_turns import Turn
from cairn.events import extraction as figures
from cairn.events.extraction import agent_key

# One call per session with all its new turns: ARGV = ref, now, debounce, max wait, max turns, ttl, then
# (field, turn, position) for each turn.
ADD = """
local done = tonumber(redis.call('GET', KEYS[5]) or '0')
local added = 0
for i = 7, #ARGV, 3 do
  if tonumber(ARGV[i + 2]) > done then added = added + redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1]) end
end
if added == 0 then return 0 end
redis.call('HINCRBY', KEYS[4], 'pending', added)
local now = tonumber(ARGV[2])
redis.call('HSETNX', KEYS[3], 'first', ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[6])
redis.call('EXPIRE', KEYS[3], ARGV[6])
local first = tonumber(redis.call('HGET', KEYS[3], 'first'))
local due = math.min(now + tonumber(ARGV[3]), first + tonumber(ARGV[4]))
if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[5]) then due = now end
local held = tonumber(redis.call('HGET', KEYS[3], 'hold_until') or '0')
if held > due then due = held end
redis.call('ZADD', KEYS[1], due, ARGV[1])
return added
"""
CLAIM = """
if not redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[4]) then return false end
redis.call('ZADD', KEYS[1], tonumber(ARGV[3]) + tonumber(ARGV[4]) / 1000, ARGV[1])
return {redis.call('HGETALL', KEYS[3]), redis.call('HGETALL', KEYS[4])}
"""
# Counters given as '*' count the turns this call removed.
FINISH = """
if redis.call('GET', KEYS[4]) ~= ARGV[2] then return -1 end
if tonumber(ARGV[6]) > tonumber(redis.call('GET', KEYS[6]) or '0') then
  redis.call('SET', KEYS[6], ARGV[6], 'EX', ARGV[7])
end
local n = tonumber(ARGV[8])
local removed = 0
for i = 9, 8 + n do removed = removed + redis.call('HDEL', KEYS[2], ARGV[i]) end
redis.call('HINCRBY', KEYS[5], 'pending', -removed)
for i = 9 + n, #ARGV, 2 do
  local by = ARGV[i + 1]
  if by == '*' then by = removed end
  redis.call('HINCRBY', KEYS[5], ARGV[i], by)
end
redis.call('DEL', KEYS[4])
local left = redis.call('HLEN', KEYS[2])
if left == 0 then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('DEL', KEYS[3])
else
  local now = tonumber(ARGV[3])
  redis.call('HSET', KEYS[3], 'first', ARGV[3])
  redis.call('HDEL', KEYS[3], 'hold_until', 'attempts')
  local due = now + tonumber(ARGV[4])
  if left >= tonumber(ARGV[5]) then due = now end
  redis.call('ZADD', KEYS[1], due, ARGV[1])
end
return removed
"""
PUT_BACK = """
if redis.call('GET', KEYS[3]) ~= ARGV[2] then return -1 end
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[2], 'hold_until', ARGV[3])
redis.call('HINCRBY', KEYS[2], 'attempts', 1)
redis.call('HINCRBY', KEYS[4], ARGV[4], 1)
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return 1
"""
HOUR_S = 3600


@dataclass(frozen=True)
class Claim:
    ref: str
    token: str
    turns: list[Turn]  # in transcript order, at most max_batch_turns
    attempts: int

    @property
    def tenant_id(self) -> str:
        return self.ref.split("/", 2)[0]

    @property
    def agent_id(self) -> str:
        return self.ref.split("/", 2)[1]

    @property
    def session_id(self) -> str:
        return self.ref.split("/", 2)[2]


def batch_ref(tenant_id: str, agent_id: str, session_id: str) -> str:
    return f"{tenant_id}/{agent_id}/{session_id}"


class ExtractionWindow:
    def __init__(
        self,
        redis: "Redis",
        *,
        prefix: str,
        debounce_s: float,
        max_wait_s: float,
        max_batch_turns: int,
        lease_s: float,
        keep_s: float,
        calls_per_hour: int,
    ) -> None:
        self.redis, self.prefix = redis, prefix
        self.debounce_s, self.max_wait_s, self.max_batch_turns = debounce_s, max_wait_s, max_batch_turns
        self.lease_s, self.keep_s, self.calls_per_hour = lease_s, keep_s, calls_per_hour
        self._add, self._claim = redis.register_script(ADD), redis.register_script(CLAIM)
        self._finish, self._put_back = redis.register_script(FINISH), redis.register_script(PUT_BACK)

    @property
    def due_key(self) -> str:
        return f"{self.prefix}:due"

    def _keys(self, ref: str) -> tuple[str, str, str]:
        return (f"{self.prefix}:turns:{ref}", f"{self.prefix}:meta:{ref}", f"{self.prefix}:lease:{ref}")

    def _done(self, ref: str) -> str:
        """The last position extracted (or let go) of the session: a redelivered older turn is not added again."""
        return f"{self.prefix}:done:{ref}"

    def _agent(self, ref: str) -> str:
        tenant, agent, _ = ref.split("/", 2)
        return agent_key(tenant, agent, self.prefix)

    async def add(self, tenant_id: str, agent_id: str, turns: Sequence[Turn], now: float | None = None) -> int:
        """Adds turns to their sessions' batches: one script call per session, all in one round trip; returns how
        many were new."""
        if not turns:
            return 0
        at = time.time() if now is None else now
        by_session: dict[str, list[Turn]] = {}
        for turn in turns:
            by_session.setdefault(turn.session_id, []).append(turn)
        window = (self.debounce_s, self.max_wait_s, self.max_batch_turns, int(self.keep_s))
        async with self.redis.pipeline(transaction=False) as pipe:
            for session_id, held_turns in by_session.items():
                ref = batch_ref(tenant_id, agent_id, session_id)
                held, meta, _ = self._keys(ref)
                args: list[str | int | float] = [ref, at, *window]
                for turn in held_turns:
                    args += (f"{turn.position:012d}", turn.dumps(), turn.position)
                keys = [self.due_key, held, meta, self._agent(ref), self._done(ref)]
                await self._add(keys=keys, args=args, client=pipe)
            added = await pipe.execute()
        return sum(int(a) for a in added)

    async def due(self, limit: int, now: float | None = None) -> list[str]:
        at = time.time() if now is None else now
        refs = await self.redis.zrangebyscore(self.due_key, "-inf", at, start=0, num=limit)
        return [r.decode() if isinstance(r, bytes) else str(r) for r in refs]

    async def claim(self, ref: str, now: float | None = None) -> Claim | None:
        """The batch, held by this caller until it finishes or puts it back, or for `lease_s`; None when another
        holds it."""
        at = time.time() if now is None else now
        held, meta, lease = self._keys(ref)
        token = uuid.uuid4().hex
        got: Any = await self._claim(
            keys=[self.due_key, lease, held, meta], args=[ref, token, at, int(self.lease_s * 1000)]
        )
        if not got:
            return None
        stored, info = _pairs(got[0]), _pairs(got[1])
        turns = [Turn.loads(stored[field]) for field in sorted(stored)[: self.max_batch_turns]]
        return Claim(ref, token, turns, int(info.get("attempts", "0")))

    async def finish(self, claim: Claim, counts: dict[str, int | str], now: float | None = None) -> int:
        """Lets go of the claimed turns (extracted, or nothing to extract them with), adds `counts` to the agent's
        figures ('*': the number of turns let go), and makes what arrived meanwhile the next batch. -1 when the
        lease ran out and another replica holds the batch now."""
        at = time.time() if now is None else now
        held, meta, lease = self._keys(claim.ref)
        fields = [f"{t.position:012d}" for t in claim.turns]
        pairs = [x for name, by in counts.items() for x in (name, by)]
        args: list[str | int | float] = [
            claim.ref,
            claim.token,
            at,
            self.debounce_s,
            self.max_batch_turns,
            max((t.position for t in claim.turns), default=0),
            int(self.keep_s),
            len(fields),
            *fields,
            *pairs,
        ]
        keys = [self.due_key, held, meta, lease, self._agent(claim.ref), self._done(claim.ref)]
        return int(await self._finish(keys=keys, args=args))

    async def put_back(self, claim: Claim, until: float, counter: str) -> bool:
        """The batch waits, whole, until `until` (the model down, or the hourly cap reached)."""
        _, meta, lease = self._keys(claim.ref)
        keys = [self.due_key, meta, lease, self._agent(claim.ref)]
        return int(await self._put_back(keys=keys, args=[claim.ref, claim.token, until, counter])) == 1

    async def take_call(self, claim: Claim, now: float | None = None) -> float | None:
        """Counts a model call against the session's hour; None when allowed, else when the next hour starts."""
        at = time.time() if now is None else now
        hour = int(at // HOUR_S)
        key = f"{self.prefix}:calls:{claim.tenant_id}:{claim.session_id}:{hour}"
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.expire(key, HOUR_S + 60)
            count, _ = await pipe.execute()
        return None if int(count) <= self.calls_per_hour else float((hour + 1) * HOUR_S)

    async def give_back_call(self, claim: Claim, now: float | None = None) -> None:
        """A call the model never answered does not count against the cap."""
        at = time.time() if now is None else now
        await self.redis.decr(f"{self.prefix}:calls:{claim.tenant_id}:{claim.session_id}:{int(at // HOUR_S)}")

    async def figures(self, tenant_id: str, agent_id: str) -> figures.ExtractionFigures:
        return figures.ExtractionFigures.of(await self.redis.hgetall(agent_key(tenant_id, agent_id, self.prefix)))


def _pairs(flat: list[Any]) -> dict[str, str]:
    text = [x.decode() if isinstance(x, bytes) else str(x) for x in flat]
    return dict(zip(text[::2], text[1::2], strict=True))
