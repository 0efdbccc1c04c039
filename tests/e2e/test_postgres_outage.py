"""Postgres away for longer than the delivery budget while events are in flight (issue 28): the session
service holds what it fetched, retrying for as long as the outage lasts, reports itself not ready meanwhile,
and once Postgres is back applies every event exactly once, in order, with nothing dead-lettered.

On a stack of its own (ports, data folder): stopping the shared session stack's Postgres would fail other
tests. Only ingest (to create tenants) and session run; the outage's events are published straight to the
ingest stream, as ingest publishes them, so that they reach the session service while Postgres is down."""

import asyncio
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import httpx
import pytest

from cairn.delivery.nats import connect
from cairn.delivery.publisher import EventPublisher
from cairn.events import DEAD_LETTER_STREAM, InboundMessage, MessageReceived
from cairn.local import LocalStack
from tests.conftest import Tenant

pytestmark = pytest.mark.e2e

MAX_DELIVER, ACK_WAIT_S = 2, 2
# Longer than the old budget (2 deliveries, 0.4 s apart) and than ack_wait several times over.
OUTAGE_S = 4 * ACK_WAIT_S
BEFORE, DURING = 3, 10


@pytest.fixture(scope="module")
def outage_stack() -> Iterator[LocalStack]:
    home = Path(tempfile.mkdtemp(prefix="cairn-outage-", dir=os.environ.get("CAIRN_TEST_TMP", "/tmp")))
    home.chmod(0o755)
    env = {
        "OTEL_TRACES_EXPORTER": "none",
        "CAIRN_NATS_MAX_DELIVER": str(MAX_DELIVER),
        "CAIRN_NATS_ACK_WAIT_S": str(ACK_WAIT_S),
        "CAIRN_NATS_RETRY_CAP_S": "0.5",
        "CAIRN_SUPERVISION_STALLED_AFTER_S": "1",
    }
    local = LocalStack(home, durable=False, extra_env=env)
    local._assign_ports()
    try:
        local.start_servers()
        local.migrate()
        for service in ("ingest", "session"):
            local.start_service(service)
        for service in ("ingest", "session"):
            local.wait_ready(service)
        yield local
    finally:
        local.down()
        kept = Path(os.environ.get("CAIRN_TEST_LOGS", "/tmp/cairn-test-logs")) / "outage"
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(home / "logs", kept, dirs_exist_ok=True)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(local.postgres.base, ignore_errors=True)


def readiness(stack: LocalStack, service: str) -> tuple[int, dict[str, str]]:
    response = httpx.get(f"{stack.url(service)}/readyz", timeout=10)
    body: dict[str, str] = response.json()
    return response.status_code, body


def poll(check: Callable[[], object], within: float, interval: float = 0.2) -> object:
    """Bounded: `check` until it holds, at most `within` seconds; its last result either way."""
    deadline = time.monotonic() + within
    result = check()
    while not result and time.monotonic() < deadline:
        time.sleep(interval)
        result = check()
    return result


async def transcript(stack: LocalStack, tenant_id: str) -> list[str]:
    conn = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        rows = await conn.fetch(
            "SELECT external_id FROM session.entries WHERE tenant_id = $1 AND kind = 'message' ORDER BY position",
            uuid.UUID(tenant_id),
        )
    finally:
        await conn.close()
    return [row["external_id"] for row in rows]


async def publish_received(stack: LocalStack, events: list[MessageReceived]) -> None:
    nc = await connect(stack.nats_url, "cairn-outage-test", attempts=3)
    try:
        publisher = EventPublisher(nc.jetstream())
        for event in events:
            await publisher.publish(event, msg_id=event.event_id)
    finally:
        await nc.close()


async def dead_letters(stack: LocalStack) -> int:
    nc = await connect(stack.nats_url, "cairn-outage-test", attempts=3)
    try:
        return int((await nc.jetstream().stream_info(DEAD_LETTER_STREAM)).state.messages)
    finally:
        await nc.close()


def received(tenant: Tenant, session_key: str, message_id: str) -> MessageReceived:
    """The event ingest publishes for an accepted message."""
    message = InboundMessage(channel="telegram", peer_id="7", text=f"said during the outage {message_id}",
                             message_id=message_id)  # fmt: skip
    return MessageReceived(tenant_id=tenant.tenant_id, agent_id="main", occurred_at=datetime.now(UTC),
                           session_key=session_key, message=message)  # fmt: skip


def test_postgres_down_longer_than_the_delivery_budget_loses_reorders_and_dead_letters_nothing(
    outage_stack: LocalStack,
) -> None:
    stack = outage_stack
    tenants = [Tenant(stack), Tenant(stack)]
    try:
        expected: dict[str, list[str]] = {t.tenant_id: [] for t in tenants}
        keys: dict[str, str] = {}
        for n in range(BEFORE):
            for tenant in tenants:
                message_id = f"before-{n}"
                keys[tenant.tenant_id] = tenant.say(f"before the outage {n}", channel="telegram", peer_id="7",
                                                    message_id=message_id)["session_key"]  # fmt: skip
                expected[tenant.tenant_id].append(message_id)
        assert poll(lambda: all(asyncio.run(transcript(stack, t.tenant_id)) == expected[t.tenant_id] for t in tenants),
                    30), "the messages before the outage are applied"  # fmt: skip

        stack.postgres.stop()
        try:
            events = []
            for n in range(DURING):
                for tenant in tenants:
                    events.append(received(tenant, keys[tenant.tenant_id], f"during-{n}"))
                    expected[tenant.tenant_id].append(f"during-{n}")
            asyncio.run(publish_received(stack, events))

            def holding() -> bool:
                status, body = readiness(stack, "session")
                return status == 503 and "retrying" in body.get("consumers", "")

            assert poll(holding, 30), f"session reports its consumer retrying: {readiness(stack, 'session')}"
            deadline = time.monotonic() + OUTAGE_S
            while time.monotonic() < deadline:  # the outage goes on: nothing may be dead-lettered meanwhile
                assert asyncio.run(dead_letters(stack)) == 0
                assert holding()
                time.sleep(0.5)
        finally:
            stack.postgres.start(stack.state.ports["postgres"])

        def all_applied() -> bool:
            return all(asyncio.run(transcript(stack, t.tenant_id)) == expected[t.tenant_id] for t in tenants)

        assert poll(all_applied, 60), {t.tenant_id: asyncio.run(transcript(stack, t.tenant_id)) for t in tenants}
        assert asyncio.run(dead_letters(stack)) == 0
        stack.wait_ready("session", timeout=30)
        stack.wait_ready("ingest", timeout=30)
        status, body = readiness(stack, "session")
        assert (status, body.get("consumers")) == (200, "ok")
    finally:
        for tenant in tenants:
            tenant.close()
