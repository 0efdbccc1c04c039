"""An operator's round trip through the real services: messages the session service cannot store (a database rule
refuses them, as a broken migration or a constraint would) are dead-lettered; `cairn dead-letters` lists them for
the tenant and shows one; once the rule is gone, a retry stores it (searchable exactly once) and another is
discarded for good."""

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from cairn.local import LocalStack
from tests.conftest import Tenant

pytestmark = pytest.mark.e2e

REFUSE = """
CREATE FUNCTION public.{name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'entries of tenant % refused by the test', NEW.tenant_id; END $$;
CREATE TRIGGER {name} BEFORE INSERT ON session.entries FOR EACH ROW
    WHEN (NEW.tenant_id = '{tenant}'::uuid) EXECUTE FUNCTION public.{name}();
"""
ALLOW = "DROP TRIGGER IF EXISTS {name} ON session.entries; DROP FUNCTION IF EXISTS public.{name}();"


def _superuser(stack: LocalStack, sql: str) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(stack.postgres_url("postgres"))
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


@pytest.fixture
def refused(services: LocalStack, tenant: Tenant) -> Iterator[str]:
    """A rule refusing the tenant's transcript entries; yields the SQL that removes it (dropped after in any case)."""
    name = f"refuse_{uuid.uuid4().hex[:8]}"
    _superuser(services, REFUSE.format(name=name, tenant=tenant.tenant_id))
    try:
        yield ALLOW.format(name=name)
    finally:
        _superuser(services, ALLOW.format(name=name))


def cli(stack: LocalStack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CAIRN_NATS_URL": stack.nats_url}
    return subprocess.run([str(Path(sys.executable).parent / "cairn"), "dead-letters", *args], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)  # fmt: skip


def listed(stack: LocalStack, tenant: Tenant, count: int, within: float = 60.0) -> list[dict[str, Any]]:
    """The tenant's dead letters once there are `count` (bounded wait: retries back off before dead-lettering)."""
    deadline = time.monotonic() + within
    while True:
        done = cli(stack, "list", "--tenant", tenant.tenant_id, "--json")
        assert done.returncode == 0, done.stderr
        rows = [json.loads(line) for line in done.stdout.splitlines()]
        if len(rows) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(0.5)


def found(tenant: Tenant, word: str, within: float = 20.0) -> list[Any]:
    deadline = time.monotonic() + within
    while True:
        results: list[Any] = tenant.search(word)["results"]  # type: ignore[assignment]
        if results or time.monotonic() > deadline:
            return results
        time.sleep(0.2)


def test_an_operator_lists_shows_retries_and_discards_what_the_session_service_dead_lettered(
    services: LocalStack, tenant: Tenant, refused: str
) -> None:
    kept, dropped = f"kept{uuid.uuid4().hex[:8]}", f"dropped{uuid.uuid4().hex[:8]}"
    first = tenant.say(f"please remember {kept}", channel="telegram", peer_id="7", message_id="dl-1")
    tenant.say(f"please forget {dropped}", channel="telegram", peer_id="7", message_id="dl-2")

    rows = listed(services, tenant, 2)
    assert len(rows) == 2, rows
    assert {r["consumer"].split("-p")[0] for r in rows} == {"session"}
    assert {r["stream"] for r in rows} == {"CAIRN_INGEST"}
    assert all("refused by the test" in r["reason"] for r in rows)
    assert all(r["subject"].startswith(f"cairn.{tenant.tenant_id}.main.message.received") for r in rows)
    assert all(r["tenant"] == tenant.tenant_id and r["time"] for r in rows)
    assert rows[0]["stream_seq"] == int(first["position"])
    shown = cli(services, "show", str(rows[0]["seq"]))
    assert shown.returncode == 0, shown.stderr
    payload = json.loads(shown.stdout)["payload"]
    assert (payload["event_id"], payload["message"]["text"]) == (first["event_id"], f"please remember {kept}")
    assert tenant.search(kept)["results"] == [], "202 was answered, nothing stored: the dead letter is all there is"

    _superuser(services, refused)  # the operator removes the cause
    retried = cli(services, "retry", str(rows[0]["seq"]))
    assert retried.returncode == 0, retried.stderr
    hits = found(tenant, kept)
    assert [h["message_id"] for h in hits if kept in h["snippet"]] != [], hits
    assert len(hits) == 1, "stored once"
    discarded = cli(services, "discard", str(rows[1]["seq"]), "--reason", "the user took it back")
    assert discarded.returncode == 0, discarded.stderr
    assert "reason: the user took it back" in discarded.stdout
    assert listed(services, tenant, 0) == []
    assert tenant.search(dropped)["results"] == []
