"""Issue 28 on the running stack: `GET /v1/memory/status` tells a tenant how many of its events each consumer
dead-lettered, counted from the dead-letter stream's subjects (`cairn-dead-letter.<consumer>.<tenant>`), and
nothing of another tenant's."""

import asyncio
import json
import re
import time
import uuid
from typing import Any

import nats
import pytest

from cairn.events import INGEST_STREAM, InboundMessage, MessageReceived, subject_for
from cairn.local import LocalStack
from tests.conftest import Tenant

pytestmark = pytest.mark.e2e
# the session service's consumer of CAIRN_INGEST, one per partition
SESSION = re.compile(r"session(-p[0-9]+)?")


async def _publish_past_the_door(stack: LocalStack, event: MessageReceived) -> None:
    """An event ingest would have refused (a NUL in its text), published straight to NATS: the session service
    cannot decode it and dead-letters it."""
    bad = event.model_dump(mode="json")
    bad["message"]["text"] = f"bad\x00 {uuid.uuid4().hex}"
    nc = await nats.connect(stack.nats_url)
    try:
        await nc.jetstream().publish(subject_for(event), json.dumps(bad).encode(), stream=INGEST_STREAM)
    finally:
        await nc.close()


def _status(tenant: Tenant) -> dict[str, Any]:
    response = tenant.recall.get("/v1/memory/status")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _session_letters(tenant: Tenant) -> dict[str, int]:
    counts: dict[str, int] = _status(tenant)["dead_letters"] or {}
    return {consumer: n for consumer, n in counts.items() if SESSION.fullmatch(consumer)}


def test_memory_status_counts_the_tenants_own_dead_letters_per_consumer(
    services: LocalStack, tenant: Tenant, other_tenant: Tenant
) -> None:
    assert _status(tenant)["dead_letters"] == {}, "a new tenant has none"
    event = MessageReceived(
        tenant_id=tenant.tenant_id, session_key="agent:main:main", message=InboundMessage(text="fine")
    )
    asyncio.run(_publish_past_the_door(services, event))

    deadline = time.monotonic() + 30
    while not _session_letters(tenant) and time.monotonic() < deadline:
        time.sleep(0.1)
    status = _status(tenant)
    (consumer,) = status["dead_letters"]
    assert SESSION.fullmatch(consumer), status["dead_letters"]
    assert status["dead_letters"] == {consumer: 1}
    assert not any("dead letters" in fallback for fallback in status["fallbacks"])

    other = _status(other_tenant)
    assert other["dead_letters"] == {}, "another tenant's dead letters are not this tenant's"
