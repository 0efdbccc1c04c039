"""`/active-memory off|on|status` end to end: sent through ingest as a user message, answered 202 like `/new`,
never in the session's history, and the switch stored in Postgres where the recall service reads it (as
`cairn_app`, under row-level security), across a kill -9 and restart of the session service."""

import asyncio
import time
import uuid
from typing import Any
from urllib.parse import quote

import asyncpg
import pytest

from cairn.local import LocalStack
from cairn.recall.recall_scope import SessionFacts, session_facts
from cairn.storage.postgres import tenant_transaction
from tests.conftest import Tenant

pytestmark = pytest.mark.e2e

PEER = {"channel": "telegram", "peer_id": "123"}


def _say(tenant: Tenant, text: str, **fields: object) -> dict[str, str]:
    return tenant.say(text, **{"message_id": f"m-{uuid.uuid4()}", **PEER, **fields})


def _texts_once_stored(tenant: Tenant, key: str, last: str, timeout: float = 30.0) -> list[str]:
    """The history's texts once the session service has appended `last` (bounded poll, no fixed sleep)."""
    deadline, seen = time.monotonic() + timeout, "no answer"
    while time.monotonic() < deadline:
        response = tenant.recall.get(f"/v1/sessions/{quote(key, safe=':')}/history")
        seen = response.text
        if response.status_code == 200:
            texts = [m["text"] for m in response.json()["messages"]]
            if last in texts:
                return texts
        time.sleep(0.1)
    raise AssertionError(f"{last!r} never reached the history of {key}; last answer: {seen}")


async def _read_facts(stack: LocalStack, tenant_id: str, key: str) -> SessionFacts | None:
    pool = await asyncpg.create_pool(stack.postgres_url(), min_size=1, max_size=1)
    try:
        async with tenant_transaction(pool, tenant_id) as conn:
            return await session_facts(conn, tenant_id, "main", key)
    finally:
        await pool.close()


def _switch_of(stack: LocalStack, tenant: Tenant, key: str) -> bool:
    facts = asyncio.run(_read_facts(stack, tenant.tenant_id, key))
    assert facts is not None
    return facts.active_memory


def _configure(tenant: Tenant, **config: Any) -> None:
    response = tenant.ingest.put("/v1/agents/main/config", json=config)
    assert response.status_code == 200, response.text


def test_active_memory_command_switches_its_session_is_never_stored_and_survives_a_restart(
    services: LocalStack, tenant: Tenant
) -> None:
    _configure(tenant, dm_scope="per-channel-peer")
    first = _say(tenant, "I fly to Lisbon on Tuesday")
    key = first["session_key"]
    off = _say(tenant, "/active-memory off")
    new = _say(tenant, "/new", peer_id="456")  # what ingest answers a command it does not interpret
    assert set(off) == set(new) == {"event_id", "session_key", "position"}
    assert off["session_key"] == key
    assert int(off["position"]) > int(first["position"])
    _say(tenant, "/active-memory offline")  # not the command: an ordinary message
    _say(tenant, "what is my plan?")
    assert _texts_once_stored(tenant, key, "what is my plan?") == [
        "I fly to Lisbon on Tuesday",
        "/active-memory offline",
        "what is my plan?",
    ]
    assert _switch_of(services, tenant, key) is False

    services.kill_service("session")
    services.start_service("session")
    services.wait_ready("session")
    _say(tenant, "  /ACTIVE-MEMORY  status ")
    _say(tenant, "still off?")
    assert "still off?" in _texts_once_stored(tenant, key, "still off?")
    assert _switch_of(services, tenant, key) is False

    _say(tenant, "/active-memory on")
    _say(tenant, "on again")
    texts = _texts_once_stored(tenant, key, "on again")
    assert [t for t in texts if t.lower().split()[0] == "/active-memory"] == ["/active-memory offline"]
    assert _switch_of(services, tenant, key) is True
