"""Counting in Redis, shared by every replica: request rates (GCRA, the tenant's and the key's bucket checked and
taken in one script, one round trip), the daily message quota and failed authentications per client address.

Redis being away never refuses a request and never holds one up: each call is bounded by `redis_timeout_s`;
a failure lets the request through uncounted, is counted in `fail_open`, logged once, and Redis is left alone
for `redis_retry_s` so that requests do not each wait out the bound."""

import asyncio
import datetime
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from cairn.edge.settings import LimitSettings

log = logging.getLogger(__name__)

# GCRA over N buckets: KEYS the buckets, ARGV pairs (emission interval µs, capacity). Every bucket is checked
# before any is taken, so a request refused by its key's bucket does not use up its tenant's. Answers
# {allowed, bucket that decided (1-based), remaining, reset µs, retry after µs}: the refusing bucket, or the one
# with the fewest requests left.
GCRA = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000000 + tonumber(now_parts[2])
local tats, worst, worst_left, worst_reset = {}, 1, math.huge, 0
for i, key in ipairs(KEYS) do
  local interval, capacity = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then tat = now end
  local new_tat = tat + interval
  local allow_at = new_tat - interval * capacity
  if allow_at > now then
    return {0, i, 0, math.ceil(tat - now), math.ceil(allow_at - now)}
  end
  tats[i] = new_tat
  local left = math.floor((now - allow_at) / interval)
  if left < worst_left then worst, worst_left, worst_reset = i, left, new_tat - now end
end
for i, key in ipairs(KEYS) do
  redis.call('SET', key, string.format('%.0f', tats[i]), 'PX', math.ceil((tats[i] - now) / 1000) + 1)
end
return {1, worst, worst_left, math.ceil(worst_reset), 0}
"""
# Take n from today's message count unless that passes the limit: {taken, count after}.
TAKE_DAILY = """
local used = tonumber(redis.call('GET', KEYS[1]) or 0)
local n, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
if used + n > limit then return {0, used} end
used = redis.call('INCRBY', KEYS[1], n)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return {1, used}
"""
# One more invalid key from an address, in a window that starts with its first (EXPIRE NX needs Redis 7).
FAIL_AUTH = """
local failures = redis.call('INCR', KEYS[1])
if failures == 1 then redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1])) end
return failures
"""
DAY_S = 86_400


@dataclass(frozen=True)
class Bucket:
    """One rate a request is held to: `name` says which in an answer ("write per tenant")."""

    key: str
    name: str
    per_s: float
    capacity: int


@dataclass(frozen=True)
class Decision:
    allowed: bool
    bucket: Bucket
    remaining: int
    reset_s: int
    retry_after_s: int


@dataclass
class LimitCounters:
    """What the limits did, for /metrics (read by the platform's collector)."""

    fail_open: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    invalid_lookups: int = 0
    auth_throttled: int = 0
    invalid_key_cache_hits: int = 0

    def refusal(self, limit: str) -> None:
        self.refused[limit] = self.refused.get(limit, 0) + 1


def bucket(tenant: str, which: str, name: str, per_s: float, burst_s: float) -> Bucket:
    """A tenant's buckets share a hash tag, so that they live on one Redis Cluster node (one script takes both)."""
    return Bucket(f"cairn:rate:{{{tenant}}}:{which}", name, per_s, max(1, math.floor(per_s * burst_s)))


def seconds_to_midnight(now: datetime.datetime) -> int:
    tomorrow = (now + datetime.timedelta(days=1)).date()
    midnight = datetime.datetime.combine(tomorrow, datetime.time(), tzinfo=datetime.UTC)
    return max(1, math.ceil((midnight - now).total_seconds()))


class RateLimiter:
    """The Redis side of the limits; every method answers None (not counted) when Redis is away."""

    def __init__(self, redis: "Redis", settings: LimitSettings, counters: LimitCounters) -> None:
        self._redis, self._settings, self.counters = redis, settings, counters
        self._gcra = redis.register_script(GCRA)
        self._daily = redis.register_script(TAKE_DAILY)
        self._fail_auth = redis.register_script(FAIL_AUTH)
        self._away_until = 0.0
        self._logged = False

    async def _bounded(self, call: Any) -> Any:
        if time.monotonic() < self._away_until:
            self.counters.fail_open += 1
            call.close()
            return None
        try:
            async with asyncio.timeout(self._settings.redis_timeout_s):
                result = await call
        except (RedisError, OSError, TimeoutError) as error:
            self.counters.fail_open += 1
            self._away_until = time.monotonic() + self._settings.redis_retry_s
            if not self._logged:
                log.warning("rate limits: Redis unreachable (%s); requests pass uncounted until it is back", error)
                self._logged = True
            return None
        if self._logged:
            log.info("rate limits: Redis reachable again; counting resumes")
            self._logged = False
        return result

    async def take(self, buckets: list[Bucket]) -> Decision | None:
        args: list[float] = []
        for held in buckets:
            args += [1_000_000 / held.per_s, held.capacity]
        answer = await self._bounded(self._gcra(keys=[b.key for b in buckets], args=args))
        if answer is None:
            return None
        allowed, which, remaining, reset_us, retry_us = (int(v) for v in answer)
        return Decision(
            allowed=bool(allowed),
            bucket=buckets[which - 1],
            remaining=max(0, remaining),
            reset_s=math.ceil(reset_us / 1_000_000),
            retry_after_s=max(1, math.ceil(retry_us / 1_000_000)),
        )

    async def take_messages(
        self, tenant: str, count: int, limit: int, now: datetime.datetime
    ) -> tuple[bool, int] | None:
        """Count `count` messages against today's (UTC) quota: (taken, today's count), None when not counted."""
        key = f"cairn:quota:{{{tenant}}}:messages:{now.date().isoformat()}"
        answer = await self._bounded(self._daily(keys=[key], args=[count, limit, 2 * DAY_S]))
        return None if answer is None else (bool(answer[0]), int(answer[1]))

    async def messages_today(self, tenant: str, now: datetime.datetime) -> int | None:
        value = await self._bounded(self._redis.get(f"cairn:quota:{{{tenant}}}:messages:{now.date().isoformat()}"))
        return None if value is None and time.monotonic() < self._away_until else int(value or 0)

    async def auth_failures(self, address: str) -> int | None:
        value = await self._bounded(self._redis.get(f"cairn:auth-failures:{address}"))
        return None if value is None and time.monotonic() < self._away_until else int(value or 0)

    async def fail_auth(self, address: str) -> int | None:
        """Count one invalid key from `address` in its window; the count so far."""
        window = math.ceil(self._settings.auth_window_s)
        failures = await self._bounded(self._fail_auth(keys=[f"cairn:auth-failures:{address}"], args=[window]))
        return None if failures is None else int(failures)
