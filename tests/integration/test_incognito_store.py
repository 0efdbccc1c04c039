"""Incognito threads in the real Redis, written as ingest writes them and read as recall reads them: gap-free
positions from concurrent writers (replicas), adapter ids stored once, a size limit, a TTL on every key, and nothing
for a thread that is not live."""

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from redis.asyncio import Redis

from cairn.events.incognito import IncognitoEntry
from cairn.ingest.incognito_store import IncognitoSettings, IncognitoThreads, ThreadFull, ThreadGone
from cairn.local import LocalStack
from cairn.recall.incognito_reads import read_thread

pytestmark = pytest.mark.integration
TENANT = str(uuid.uuid4())


@pytest.fixture
async def redis(stack: LocalStack) -> AsyncIterator[Redis]:
    client = Redis.from_url(stack.redis_url)
    yield client
    await client.aclose()


def _entry(text: str, external_id: str | None = None, kind: str = "message") -> IncognitoEntry:
    now = datetime.now(UTC)
    return IncognitoEntry(
        kind=kind, message_id=str(uuid.uuid4()), channel="web", external_id=external_id, role="user", text=text,
        occurred_at=now, recorded_at=now,
    )  # fmt: skip


async def test_two_writers_append_gap_free_and_a_read_sees_every_entry_in_order(
    redis: Redis, stack: LocalStack
) -> None:
    other = Redis.from_url(stack.redis_url)  # a second replica's connection
    try:
        one, two = IncognitoThreads(redis, IncognitoSettings()), IncognitoThreads(other, IncognitoSettings())
        key = f"agent:main:dashboard:incognito-{uuid.uuid4()}"
        await one.create(TENANT, "main", key, "s-1", None)
        appended = await asyncio.gather(
            *(writer.append(TENANT, "main", key, _entry(f"m{i}")) for i in range(50) for writer in (one, two))
        )
        assert sorted(a.position for a in appended) == list(range(1, 101))
        thread = await read_thread(other, TENANT, "main", key)
        assert thread is not None
        assert [e.position for e in thread.entries] == list(range(1, 101))
        assert {e.entry.message_id for e in thread.entries} == {a.message_id for a in appended}
    finally:
        await other.aclose()


async def test_an_adapter_id_is_stored_once_and_a_reset_opens_the_next_window(redis: Redis) -> None:
    threads = IncognitoThreads(redis, IncognitoSettings())
    key = f"agent:main:dashboard:incognito-{uuid.uuid4()}"
    await threads.create(TENANT, "main", key, "s-2", "agent:main:main")
    first = await threads.append(TENANT, "main", key, _entry("hello", "w-1"))
    again = await threads.append(TENANT, "main", key, _entry("hello", "w-1"))
    assert (again.position, again.message_id, again.duplicate) == (first.position, first.message_id, True)
    await threads.append(TENANT, "main", key, _entry("", kind="reset"))
    await threads.append(TENANT, "main", key, _entry("after"))
    thread = await read_thread(redis, TENANT, "main", key)
    assert thread is not None
    assert (thread.session_id, thread.parent_session_key, thread.reset_index) == ("s-2", "agent:main:main", 1)
    assert [(e.position, e.reset_index, e.entry.kind) for e in thread.entries] == [
        (1, 0, "message"),
        (2, 1, "reset"),
        (3, 1, "message"),
    ]


async def test_every_key_of_a_thread_expires_and_a_full_or_unknown_thread_refuses(redis: Redis) -> None:
    threads = IncognitoThreads(redis, IncognitoSettings(ttl_s=600, max_entries=10))
    key = f"agent:main:dashboard:incognito-{uuid.uuid4()}"
    with pytest.raises(ThreadGone):
        await threads.append(TENANT, "main", key, _entry("nobody created me"))
    assert await read_thread(redis, TENANT, "main", key) is None
    await threads.create(TENANT, "main", key, "s-3", None)
    for i in range(10):
        await threads.append(TENANT, "main", key, _entry(f"m{i}", f"x-{i}"))
    with pytest.raises(ThreadFull):
        await threads.append(TENANT, "main", key, _entry("one too many"))
    names = await redis.keys(f"cairn:incognito:{{{TENANT}:main:{key}}}:*")
    assert len(names) == 3
    for name in names:
        assert 0 < await redis.pttl(name) <= 600_000
    assert await read_thread(redis, TENANT, "other-agent", key) is None
