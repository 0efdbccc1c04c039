"""Session lifecycle: quiet sessions become dormant, then archived, stay readable and searchable, and a
new message makes them active again."""

import asyncio
import time
from datetime import timedelta

import asyncpg
import pytest

from cairn.local import LocalStack
from cairn.session.lifecycle import LifecycleSweeper
from tests.conftest import Tenant


async def _sweep(stack: LocalStack, tenant: str, dormant_after: timedelta, archive_after: timedelta) -> tuple[int, int]:
    pool = await asyncpg.create_pool(stack.postgres_url(), min_size=1, max_size=1)
    try:  # one tenant only: other tests' sessions in the shared stack keep their status
        return await LifecycleSweeper(pool, dormant_after, archive_after, every_s=60).sweep(tenant)
    finally:
        await pool.close()


def _status(tenant: Tenant) -> str:
    sessions = tenant.recall.get("/v1/sessions").json()["sessions"]
    assert len(sessions) == 1
    status: str = sessions[0]["status"]
    return status


@pytest.mark.e2e
def test_sessions_age_and_wake_up(services: LocalStack, tenant: Tenant) -> None:
    written = tenant.say("the quarterly numbers look fine", message_id="l1")
    tenant.search("quarterly", consistent_with=written["position"])
    assert _status(tenant) == "active"

    dormant, _ = asyncio.run(_sweep(services, tenant.tenant_id, timedelta(0), timedelta(days=1)))
    assert dormant == 1
    assert _status(tenant) == "dormant"
    assert tenant.recall.get("/v1/sessions", params={"status": "dormant"}).json()["sessions"]

    _, archived = asyncio.run(_sweep(services, tenant.tenant_id, timedelta(0), timedelta(0)))
    assert archived == 1
    assert _status(tenant) == "archived"
    history = tenant.recall.get("/v1/sessions/agent:main:main/history").json()
    assert [m["text"] for m in history["messages"]] == ["the quarterly numbers look fine"]
    assert tenant.search("quarterly")["results"], "archived sessions stay searchable"

    again = tenant.say("one more thing", message_id="l2")
    tenant.search("thing", consistent_with=again["position"])
    deadline = time.monotonic() + 10
    while _status(tenant) != "active" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _status(tenant) == "active"
