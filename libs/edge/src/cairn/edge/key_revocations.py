"""Revoked keys forgotten on every replica of every service within about a second: whoever revokes or rotates a
key announces its id on a Redis channel, and every process listens (`RevocationListener`, one of its
background loops) and drops what it kept of that key.

Fail safe: while a process is not subscribed (Redis away, or reconnecting), `ApiKeys` keeps what it resolves
only `FALLBACK_CACHE_S`, and on (re)subscribing it forgets everything it kept before, since an announcement may
have been missed meanwhile. A key whose announcement could not be sent (Redis away for the revoking replica
only) is forgotten by the others when their cached grant ends (`LISTENING_CACHE_S` at most)."""

import asyncio
import logging

from redis.asyncio import Redis
from redis.exceptions import RedisError

from cairn.edge.auth import FALLBACK_CACHE_S, LISTENING_CACHE_S, ApiKeys

log = logging.getLogger(__name__)

CHANNEL = "cairn:keys:revoked"
PING_EVERY_S = 5.0  # a connection that died silently is noticed within this, and the fallback cache time used


async def announce(redis: "Redis", key_id: str) -> None:
    """Tell every process that this key changed (revoked, or its end moved by a rotation)."""
    try:
        await redis.publish(CHANNEL, key_id)
    except (RedisError, OSError) as error:
        log.warning("could not announce the change of key %s (other replicas drop it within %.0f s): %s",
                    key_id, LISTENING_CACHE_S, error)  # fmt: skip


class RevocationListener:
    """A service's background loop (`consumer`, `stream`, `run`, like its pull consumers)."""

    consumer = "key-revocation-listener"
    stream = "-"

    def __init__(self, redis: "Redis", keys: ApiKeys, retry_s: float = 0.5) -> None:
        self._redis, self._keys, self._retry_s = redis, keys, retry_s

    async def run(self) -> None:
        while True:
            try:
                await self._listen()
            except (RedisError, OSError, TimeoutError) as error:  # TimeoutError: a ping that never went out
                log.warning(
                    "not listening for key revocations (keys are kept %.0f s meanwhile): %s", FALLBACK_CACHE_S, error
                )
            finally:
                self._keys.listening = False
                self._keys.forget()
            await asyncio.sleep(self._retry_s)

    async def _listen(self) -> None:
        async with self._redis.pubsub() as pubsub:
            await pubsub.subscribe(CHANNEL)
            while True:
                message = await pubsub.get_message(timeout=PING_EVERY_S)
                if message is None:
                    await asyncio.wait_for(pubsub.ping(), PING_EVERY_S)
                elif message["type"] == "subscribe":
                    # the first subscription, or redis-py's own after a reconnect: what was kept before it may
                    # have missed an announcement
                    self._keys.forget()
                    self._keys.listening = True
                elif message["type"] == "message":
                    data = message["data"]
                    self._keys.forget(data.decode() if isinstance(data, bytes) else str(data))
