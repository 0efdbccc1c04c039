"""Crash safety: kill -9 the session service and the indexer while 1,000 messages are being ingested;
afterwards every message is stored, indexed and searchable exactly once."""

import asyncio
import threading
import time

import asyncpg
import pytest

from cairn.local import LocalStack
from tests.conftest import Tenant

TOTAL = 1000
BATCH = 10


def _ingest(tenant: Tenant, accepted: list[int], failures: list[str]) -> None:
    for start in range(0, TOTAL, BATCH):
        batch = [
            {
                "text": f"crash test message {i} token cx{i:04d}q",
                "message_id": f"crash-{i}",
                "channel": "telegram",
                "peer_id": "9",
            }
            for i in range(start, start + BATCH)
        ]
        response = tenant.ingest.post("/v1/messages/batch", json={"messages": batch})
        if response.status_code != 202:
            failures.append(response.text)
            return
        accepted.append(response.json()["accepted"])


async def _counts(stack: LocalStack, tenant_id: str) -> tuple[int, int, int]:
    conn = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        entries = await conn.fetchval(
            "SELECT count(*) FROM session.entries WHERE tenant_id = $1 AND kind = 'message'", tenant_id
        )
        indexed = await conn.fetchval("SELECT count(*) FROM indexer.messages WHERE tenant_id = $1", tenant_id)
        distinct = await conn.fetchval(
            "SELECT count(DISTINCT external_id) FROM session.entries WHERE tenant_id = $1", tenant_id
        )
        return int(entries), int(indexed), int(distinct)
    finally:
        await conn.close()


def _wait_accepted(accepted: list[int], at_least: int, writer: threading.Thread) -> None:
    deadline = time.monotonic() + 120
    while sum(accepted) < at_least and writer.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.e2e
def test_kill_9_during_ingest_loses_and_duplicates_nothing(services: LocalStack, tenant: Tenant) -> None:
    accepted: list[int] = []
    failures: list[str] = []
    writer = threading.Thread(target=_ingest, args=(tenant, accepted, failures))
    writer.start()
    _wait_accepted(accepted, 250, writer)
    services.kill_service("session")
    services.start_service("session")
    _wait_accepted(accepted, 600, writer)
    services.kill_service("indexer")
    services.start_service("indexer")
    writer.join(timeout=300)
    services.wait_ready("session")
    services.wait_ready("indexer")
    assert failures == []
    assert sum(accepted) == TOTAL

    deadline = time.monotonic() + 180
    counts = asyncio.run(_counts(services, tenant.tenant_id))
    while counts != (TOTAL, TOTAL, TOTAL) and time.monotonic() < deadline:
        time.sleep(0.5)
        counts = asyncio.run(_counts(services, tenant.tenant_id))
    assert counts == (TOTAL, TOTAL, TOTAL)

    for i in range(TOTAL):
        hits = tenant.search(f"cx{i:04d}q")["results"]
        assert isinstance(hits, list)
        assert len(hits) == 1, (i, hits)
        assert hits[0]["snippet"] == f"crash test message {i} token cx{i:04d}q"
