"""Two session-service replicas: interleaved messages for the same sessions from many clients are
appended gap-free, in ingest order and never twice, while both replicas work."""

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import asyncpg
import pytest
from redis import Redis

from cairn.local import LocalStack
from cairn.local.processes import stop_pid
from tests.conftest import Tenant

AGENTS = [f"a{i}" for i in range(12)]
PER_AGENT = 25


async def _positions(stack: LocalStack, tenant_id: str) -> dict[str, list[tuple[int, int]]]:
    """(position, ingest sequence) of every message entry, per session, in position order."""
    conn = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        rows = await conn.fetch(
            "SELECT session_id::text, position, ingest_seq FROM session.entries "
            "WHERE tenant_id = $1 AND kind = 'message' ORDER BY session_id, position",
            tenant_id,
        )
    finally:
        await conn.close()
    sessions: dict[str, list[tuple[int, int]]] = {}
    for row in rows:
        sessions.setdefault(row["session_id"], []).append((row["position"], row["ingest_seq"]))
    return sessions


def _leases(stack: LocalStack) -> dict[bytes, bytes]:
    """The holder of every leased session partition."""
    with Redis.from_url(stack.redis_url) as redis:
        return {key: value for key in redis.keys("cairn:lease:session:*") if (value := redis.get(key)) is not None}


def _lease_holders(stack: LocalStack) -> set[bytes]:
    return set(_leases(stack).values())


def _wait_for_one_replica_to_hold_all(stack: LocalStack, partitions: int) -> None:
    """The remaining replica takes the stopped one's partitions back before the next test writes (a replica
    killed after its shutdown timeout keeps them until its leases expire; messages meanwhile wait)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        leases = _leases(stack)
        if len(leases) >= partitions and len(set(leases.values())) == 1:
            return
        time.sleep(0.2)


@pytest.mark.e2e
def test_two_replicas_keep_every_session_gap_free_and_in_order(services: LocalStack, tenant: Tenant) -> None:
    replica, partitions = services.add_replica("session"), 1
    services.start_service(replica)
    try:
        services.wait_ready(replica)
        deadline = time.monotonic() + 30
        while len(_lease_holders(services)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(_lease_holders(services)) == 2, "both replicas hold partitions"
        partitions = len(_leases(services))

        def client(offset: int) -> None:
            for i in range(offset, PER_AGENT * len(AGENTS), 8):
                agent = AGENTS[i % len(AGENTS)]
                tenant.say(f"message {i} for {agent}", agent_id=agent, message_id=f"r-{i}")

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(client, range(8)))

        expected = PER_AGENT * len(AGENTS)
        sessions = asyncio.run(_positions(services, tenant.tenant_id))
        while sum(map(len, sessions.values())) < expected and time.monotonic() < deadline + 60:
            time.sleep(0.2)
            sessions = asyncio.run(_positions(services, tenant.tenant_id))
        assert len(sessions) == len(AGENTS)
        for entries in sessions.values():
            positions = [p for p, _ in entries]
            sequences = [s for _, s in entries]
            assert positions == list(range(1, PER_AGENT + 1)), "gap-free, never duplicated"
            assert sequences == sorted(sequences), "appended in the order ingest accepted them"
            assert len(set(sequences)) == len(sequences)
    finally:
        stop_pid(services.state.pids.pop(replica, None))
        _wait_for_one_replica_to_hold_all(services, partitions)
