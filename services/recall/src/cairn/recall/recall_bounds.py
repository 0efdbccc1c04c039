"""What keeps a recall fast whatever its model does (issue 29, "Bounds"): a circuit breaker per tenant + agent +
model shared by every recall replica, a short result cache per session + query, both in Redis, and `first_of`,
which ends the work at the deadline or when the caller hangs up.

Redis is only an aid here: a recall must never wait on it. Every Redis call is bounded (`REDIS_BOUND_S`), a call
that failed has Redis skipped for `REDIS_AWAY_S`, and a Redis that is down, slow or answering nonsense counts as
"breaker closed, nothing cached" (fail open): the worst it costs is a model call that an open breaker would have
spared, never a stalled or failed recall."""

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Literal, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError
from starlette.requests import Request

log = logging.getLogger(__name__)
T = TypeVar("T")

# How long a recall waits on Redis at most, per call. A local Redis answers in well under a millisecond; the
# client's own retries (runtime.redis_client: 3, backoff up to 0.5 s) would otherwise make a refused connection
# cost over a second.
REDIS_BOUND_S = 0.1
# What a Redis that is away raises through redis-py (a refused or reset connection is an OSError inside it, a
# read past the socket timeout a RedisError), and the bound itself running out.
_REDIS_FAILURES = (RedisError, OSError, TimeoutError)
# After a call Redis failed, how long its users skip it: an outage then costs a recall one bound per second and
# process, not one per call (a recall makes up to four).
REDIS_AWAY_S = 1.0
# How long `first_of` waits for the model call it cancelled to end: closing its connection takes a few loop
# iterations; longer is logged (a call that does not stop on cancellation is a bug of that call).
CANCEL_GRACE_S = 1.0
# How long `first_of` waits for the rest of the cancelled work before answering without it. Work that only awaits
# stops within a loop iteration; what takes longer is a cleanup that needs the database (asyncpg waits for the
# server to confirm a cancelled statement, then the rollback and the pool's reset of the connection: round trips
# to a Postgres that may be the very reason of the timeout). It finishes in the background, logged when slow.
STOP_GRACE_S = 0.05

# Count the timeout; at the threshold open the breaker for `open_ms`. The count outlives the opening (`count_ms`
# > `open_ms`), so once the window has passed the breaker is half-open: the first call after it is a probe whose
# timeout reopens it at once, while its success (`record(timed_out=False)`) deletes the count. A count that no
# call touches for `count_ms` is forgotten: timeouts minutes apart are not "consecutive".
_RECORD_TIMEOUT = """
local count = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if count >= tonumber(ARGV[1]) then
    redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
    return 1
end
return 0
"""


class _Away:
    """Whether Redis failed a call in the last `REDIS_AWAY_S`: then it is not asked (fail open at once)."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._until = 0.0

    def now(self) -> bool:
        return time.monotonic() < self._until

    def failed(self, error: BaseException, meaning: str) -> None:
        if not self.now():
            log.warning("%s: Redis did not answer (%s), %s", self._what, str(error) or type(error).__name__, meaning)
        self._until = time.monotonic() + REDIS_AWAY_S


def _digest(*parts: str) -> str:
    """A fixed-size key part for values of any size and alphabet (model names, session keys, queries)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


class Breaker:
    """Per tenant + agent + model: opens after `threshold` consecutive timeouts, for `open_s`, for every replica
    (the state is two Redis keys with TTLs, so it closes by itself, even if no replica is left to close it)."""

    def __init__(self, redis: Redis, *, threshold: int = 3, open_s: float = 60.0, count_s: float = 600.0) -> None:
        self._redis = redis
        self.threshold = threshold
        self.open_s = open_s
        self._open_ms = max(1, int(open_s * 1000))
        self._count_ms = max(self._open_ms * 2, int(count_s * 1000))
        self._record_timeout = redis.register_script(_RECORD_TIMEOUT)
        self._away = _Away("recall breaker")

    def _keys(self, tenant: str, agent: str, model: str) -> tuple[str, str]:
        base = f"cairn:recall:breaker:{{{tenant}:{agent}:{_digest(model)}}}"
        return f"{base}:timeouts", f"{base}:open"

    async def is_open(self, tenant: str, agent: str, model: str) -> bool:
        """Whether calls of this model are refused now; False (closed) when Redis does not answer in time."""
        _, opened = self._keys(tenant, agent, model)
        if self._away.now():
            return False
        try:
            async with asyncio.timeout(REDIS_BOUND_S):
                return bool(await self._redis.exists(opened))
        except _REDIS_FAILURES as error:
            self._away.failed(error, "treated as closed")
            return False

    async def record(self, tenant: str, agent: str, model: str, *, timed_out: bool) -> None:
        """A call's end: a timeout counts towards opening, anything else (an answer, an error) resets the count.
        Never raises; a record Redis did not take in time is lost (the breaker opens a little later)."""
        count, opened = self._keys(tenant, agent, model)
        if self._away.now():
            return
        try:
            async with asyncio.timeout(REDIS_BOUND_S):
                if not timed_out:
                    await self._redis.delete(count)
                elif await self._record_timeout(keys=[count, opened], args=[self.threshold, self._open_ms,
                                                                           self._count_ms]):  # fmt: skip
                    log.warning("recall breaker open for %gs: %s/%s, model %s", self.open_s, tenant, agent, model)
        except _REDIS_FAILURES as error:
            self._away.failed(error, "a call's end not recorded")


class ResultCache:
    """A recall's answer for `ttl_s` per tenant + agent + session + query: an agent runtime that asks again for
    the same message (a retry, a re-rendered prompt) gets the same block without a second lane-2 run. Answers
    larger than `max_bytes` are not kept (a block is ≤ 1800 chars; anything far larger is not a normal answer)."""

    def __init__(self, redis: Redis, *, ttl_s: float = 15.0, max_bytes: int = 16 * 1024) -> None:
        self._redis = redis
        self.ttl_s = ttl_s
        self._ttl_ms = max(1, int(ttl_s * 1000))
        self.max_bytes = max_bytes
        self._away = _Away("recall cache")

    @staticmethod
    def _key(tenant: str, agent: str, session_key: str, query: str) -> str:
        return f"cairn:recall:cache:{{{tenant}:{agent}}}:{_digest(session_key, query)}"

    async def get(self, tenant: str, agent: str, session_key: str, query: str) -> dict[str, Any] | None:
        """The cached answer, or None: none cached, expired, unreadable, or Redis not answering in time."""
        if self._away.now():
            return None
        try:
            async with asyncio.timeout(REDIS_BOUND_S):
                data = await self._redis.get(self._key(tenant, agent, session_key, query))
        except _REDIS_FAILURES as error:
            self._away.failed(error, "nothing cached")
            return None
        if data is None:
            return None
        try:
            answer = json.loads(data)
        except ValueError:
            return None
        return answer if isinstance(answer, dict) else None

    async def put(self, tenant: str, agent: str, session_key: str, query: str, answer: dict[str, Any]) -> None:
        """Keep the answer for `ttl_s`; never raises (not kept: too large, or Redis not taking it in time)."""
        data = json.dumps(answer, ensure_ascii=False, separators=(",", ":"), default=str).encode()
        if len(data) > self.max_bytes or self._away.now():
            return
        try:
            async with asyncio.timeout(REDIS_BOUND_S):
                await self._redis.set(self._key(tenant, agent, session_key, query), data, px=self._ttl_ms)
        except _REDIS_FAILURES as error:
            self._away.failed(error, "the answer not kept")


async def _disconnected(request: Request) -> None:
    """Returns once the client has hung up. Watches the ASGI `receive` channel, which (the body being read) gives
    nothing more until `http.disconnect`: uvicorn hands that message over as soon as the connection is lost,
    with no polling. (`request.is_disconnected()` only peeks: it would have to be polled, adding its interval to
    the detection and a wake-up per interval to every recall in flight.) Measured with uvicorn/httptools, from the
    client's close to the work's cancellation: 0.2 ms median (max 0.6 ms) watching, 50 ms polling every 50 ms."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def _stop(task: "asyncio.Future[Any]", first: "asyncio.Future[Any] | None") -> None:
    """Cancel `first` (the model call in flight) and wait (bounded) until it has ended, so its connection is
    closed before the answer goes out; then cancel the task and give it `STOP_GRACE_S` to stop, leaving it to
    finish in the background after that."""
    if first is not None and not first.done():
        first.cancel()
        ended, _ = await asyncio.wait({first}, timeout=CANCEL_GRACE_S)
        if not ended:
            log.error("a model call still open %gs after its cancellation: left behind", CANCEL_GRACE_S)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=STOP_GRACE_S)
    if done:
        _retrieved(task)
    else:
        task.add_done_callback(partial(_stopped_late, time.monotonic()))


def _retrieved(task: "asyncio.Future[Any]") -> None:
    if not task.cancelled():
        task.exception()  # retrieved: an error on its way out is of no interest once its answer is not wanted


def _stopped_late(since: float, task: "asyncio.Future[Any]") -> None:
    took = STOP_GRACE_S + time.monotonic() - since
    if took >= CANCEL_GRACE_S:
        log.warning("cancelled work took %.1fs to stop (its answer was sent without it)", took)
    _retrieved(task)


async def first_of(
    work: Awaitable[T],
    *,
    deadline_s: float,
    request: Request,
    first: Callable[[], "asyncio.Future[Any] | None"] | None = None,
) -> T | Literal["timeout", "disconnected"]:
    """`work`'s result, or "timeout" at `deadline_s`, or "disconnected" when the HTTP caller hangs up first. In
    both of those cases the work is cancelled, so nothing keeps running for an answer nobody will read: first
    what `first` gives (the model call in flight, its own task), awaited until its connection is closed, so the
    model server sees the disconnect before the answer goes out; then the rest, awaited only `STOP_GRACE_S`
    (`_stop`). An error of the work is raised. The request's body is read first (usually it already is):
    watching for the disconnect consumes the `receive` channel, which must no longer carry body parts."""
    with contextlib.suppress(RuntimeError):  # the handler read it as a stream: the channel is as clean
        await request.body()
    task = asyncio.ensure_future(work)
    hung_up = asyncio.create_task(_disconnected(request), name="recall-disconnect-watch")
    try:
        done, _ = await asyncio.wait({task, hung_up}, timeout=deadline_s, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        return "disconnected" if hung_up in done else "timeout"
    finally:
        if not task.done():
            await _stop(task, first() if first is not None else None)
        hung_up.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):  # a receive that failed: hung up as well
            await hung_up
