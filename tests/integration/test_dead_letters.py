"""Dead letters an operator can see, retry or discard, on real JetStream and Postgres: a projection dead-letters events
its handler refuses; `cairn dead-letters` lists them per tenant, shows one, retries one once the cause is gone (applied
once, not swallowed by the duplicate window) and discards another. Each test has its own consumer and tenants."""

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import asyncpg
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext

from cairn.delivery.consumer import Delivery
from cairn.delivery.dead_letters import (
    DeadLetter,
    DeadLetterNotFound,
    NotRetryable,
    count_dead_letters,
    dead_letter,
    dead_letters,
    discard,
    retry,
    retry_msg_id,
)
from cairn.delivery.settings import NatsSettings
from cairn.events import RECALL_STREAM, Event, RecallPerformed, dead_letter_subject, subject_for
from cairn.local import LocalStack
from cairn.storage.postgres import tenant_transaction
from tests.integration.conftest import eventually, holds_for
from tests.integration.test_projection import running, settled

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
FAST = NatsSettings(max_deliver=2, ack_wait_s=1, fetch_batch=16)
TRACEPARENT = f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"


@pytest.fixture(scope="module")
async def applied_table(stack: LocalStack) -> AsyncIterator[str]:
    """Rows the handler writes, one per application: no unique key, so a second application would show."""
    schema = f"dead_letter_test_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        await conn.execute(
            f"""
            CREATE SCHEMA {schema};
            CREATE TABLE {schema}.applied (tenant_id uuid NOT NULL, event_id uuid NOT NULL);
            ALTER TABLE {schema}.applied ENABLE ROW LEVEL SECURITY;
            ALTER TABLE {schema}.applied FORCE ROW LEVEL SECURITY;
            CREATE POLICY tenant_isolation ON {schema}.applied
                USING (tenant_id = cairn.current_tenant()) WITH CHECK (tenant_id = cairn.current_tenant());
            GRANT USAGE ON SCHEMA {schema} TO cairn_app;
            GRANT SELECT, INSERT ON {schema}.applied TO cairn_app;
            """
        )
        yield f"{schema}.applied"
    finally:
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await conn.close()


class Refuser:
    """Applies its tenants' `RecallPerformed` as a row, but refuses the events listed in `refused` (the condition
    an operator fixes before a retry)."""

    def __init__(self, table: str, tenants: set[str], refused: set[str]) -> None:
        self.table, self.tenants, self.refused = table, tenants, refused
        self.handled: list[str] = []

    async def __call__(self, conn: Any, event: RecallPerformed, delivery: Delivery) -> Sequence[Event]:
        if event.tenant_id not in self.tenants:
            return []  # an earlier test's event, replayed by this new consumer
        self.handled.append(event.event_id)
        if event.event_id in self.refused:
            raise RuntimeError(f"no room for {event.event_id}")
        await conn.execute(f"INSERT INTO {self.table} VALUES ($1, $2)", uuid.UUID(event.tenant_id),
                           uuid.UUID(event.event_id))  # fmt: skip
        return []


async def applied(pool: Pool, table: str, tenant: str) -> list[str]:
    async with tenant_transaction(pool, tenant) as conn:
        return [str(r["event_id"]) for r in await conn.fetch(f"SELECT event_id FROM {table}")]


def recall(tenant: str) -> RecallPerformed:
    return RecallPerformed(tenant_id=tenant, session_key="agent:main:main", outcome="injected", items=1)


async def publish(js: JetStreamContext, event: Event) -> int:
    """As a service publishes: the event id as the message id, a trace context in the headers."""
    headers = {"Nats-Msg-Id": event.event_id, "traceparent": TRACEPARENT}
    ack = await js.publish(subject_for(event), event.model_dump_json().encode(), stream=RECALL_STREAM, headers=headers)
    return int(ack.seq)


def cli(stack: LocalStack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CAIRN_NATS_URL": stack.nats_url}
    return subprocess.run([str(Path(sys.executable).parent / "cairn"), "dead-letters", *args], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)  # fmt: skip


async def test_dead_letters_are_listed_per_tenant_shown_retried_once_fixed_and_discarded(
    stack: LocalStack, nats_client: Client, app_pool: Pool, applied_table: str
) -> None:
    js = nats_client.jetstream()
    tenant, other = str(uuid.uuid4()), str(uuid.uuid4())
    fixable, obsolete, elsewhere = recall(tenant), recall(tenant), recall(other)
    refused = {fixable.event_id, obsolete.event_id, elsewhere.event_id}
    handler = Refuser(applied_table, {tenant, other}, refused)
    async with running(js, RECALL_STREAM, {RecallPerformed: handler}, app_pool, FAST) as projection:
        seqs = {e.event_id: await publish(js, e) for e in (fixable, obsolete, elsewhere)}

        async def all_three() -> list[DeadLetter]:
            found = await dead_letters(js, consumer=projection.consumer)
            return found if len(found) == 3 else []

        assert await eventually(all_three)
        letters = await dead_letters(js, tenant=tenant)
        assert [letter.stream_seq for letter in letters] == [seqs[fixable.event_id], seqs[obsolete.event_id]]
        first = letters[0]
        assert (first.consumer, first.tenant, first.stream, first.subject, first.deliveries) == (
            projection.consumer, tenant, RECALL_STREAM, subject_for(fixable), FAST.max_deliver,
        )  # fmt: skip
        assert first.reason == f"RuntimeError: no room for {fixable.event_id}"
        assert first.time is not None
        assert first.headers["traceparent"] == TRACEPARENT, "the original's trace context is kept for a retry"
        assert await count_dead_letters(js, tenant=tenant) == {projection.consumer: 2}
        assert await count_dead_letters(js, tenant=other) == {projection.consumer: 1}
        assert (await count_dead_letters(js))[projection.consumer] == 3

        listed = await asyncio.to_thread(cli, stack, "list", "--tenant", tenant, "--json")
        assert listed.returncode == 0, listed.stderr
        rows = [json.loads(line) for line in listed.stdout.splitlines()]
        assert [(r["seq"], r["consumer"], r["tenant"], r["stream_seq"]) for r in rows] == [
            (letter.seq, projection.consumer, tenant, letter.stream_seq) for letter in letters
        ]
        assert rows[0]["reason"] == first.reason
        assert rows[0]["subject"] == subject_for(fixable)
        assert rows[0]["deliveries"] == FAST.max_deliver
        assert rows[0]["time"]
        table = await asyncio.to_thread(cli, stack, "list", "--consumer", projection.consumer)
        assert f"{RECALL_STREAM}:{seqs[elsewhere.event_id]}" in table.stdout
        assert "3 dead letters" in table.stdout

        shown = await asyncio.to_thread(cli, stack, "show", str(first.seq))
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["payload"] == fixable.model_dump(mode="json")

        refused.discard(fixable.event_id)  # the operator fixes the cause
        retried = await asyncio.to_thread(cli, stack, "retry", str(first.seq))
        assert retried.returncode == 0, retried.stderr
        assert f"published on {subject_for(fixable)}" in retried.stdout
        assert await eventually(lambda: applied(app_pool, applied_table, tenant)) == [fixable.event_id]
        with pytest.raises(DeadLetterNotFound):
            await dead_letter(js, first.seq)
        again = await asyncio.to_thread(cli, stack, "retry", str(first.seq))
        assert (again.returncode, again.stdout) == (1, "")
        assert f"no dead letter {first.seq}" in again.stderr

        gone = await asyncio.to_thread(cli, stack, "discard", str(letters[1].seq), "--reason", "superseded by a fix")
        assert gone.returncode == 0, gone.stderr
        assert "reason: superseded by a fix" in gone.stdout
        assert obsolete.event_id in gone.stdout
        assert await dead_letters(js, tenant=tenant) == []
        assert [letter.tenant for letter in await dead_letters(js, consumer=projection.consumer)] == [other]
    assert await applied(app_pool, applied_table, tenant) == [fixable.event_id], "the discarded one never applied"


async def test_a_retry_is_not_swallowed_by_the_duplicate_window_and_applies_nothing_twice(
    nats_client: Client, app_pool: Pool, applied_table: str
) -> None:
    """An event dead-lettered although the consumer did apply it (its ack lost, say): the retry is published under its
    own message id, so JetStream keeps it although the original's id is still in the hour-long duplicate window; the
    consumer then finds its `processed_events` record and applies nothing."""
    js, tenant = nats_client.jetstream(), str(uuid.uuid4())
    event = recall(tenant)
    handler = Refuser(applied_table, {tenant}, set())
    async with running(js, RECALL_STREAM, {RecallPerformed: handler}, app_pool, FAST) as projection:
        seq = await publish(js, event)
        assert await eventually(lambda: settled(js, projection, seq))
        headers = {
            "Cairn-Error": "TimeoutError: ack lost", "Cairn-Stream": RECALL_STREAM, "Cairn-Stream-Seq": str(seq),
            "Cairn-Subject": subject_for(event), "Cairn-Deliveries": "5", "traceparent": TRACEPARENT,
        }  # fmt: skip
        letter = await js.publish(dead_letter_subject(projection.consumer, tenant), event.model_dump_json().encode(),
                                  headers=headers)  # fmt: skip
        retried = await retry(js, letter.seq)
        assert (retried.duplicate, retried.seq > seq) == (False, True), "kept: a message of its own in the stream"
        republished = await js.get_msg(RECALL_STREAM, retried.seq)
        assert (republished.headers or {})["Nats-Msg-Id"] == retry_msg_id(retried.letter)
        assert (republished.headers or {})["traceparent"] == TRACEPARENT
        assert not any(k.startswith("Cairn-") for k in republished.headers or {})
        assert await eventually(lambda: settled(js, projection, retried.seq))
        assert await holds_for(lambda: _once(app_pool, applied_table, tenant, event.event_id), 1.0)
    assert handler.handled == [event.event_id], "the redelivery found its record: the handler never ran again"


async def _once(pool: Pool, table: str, tenant: str, event_id: str) -> bool:
    return await applied(pool, table, tenant) == [event_id]


async def test_a_dead_letter_whose_payload_was_not_kept_cannot_be_retried_only_discarded(nats_client: Client) -> None:
    """What must never be stored (an adapter's message refused for a secret, say) is parked without its payload."""
    js, tenant = nats_client.jetstream(), str(uuid.uuid4())
    consumer = f"test-{uuid.uuid4().hex[:12]}"
    headers = {"Cairn-Error": "refused: holds a secret", "Cairn-Stream": "CAIRN_INBOX", "Cairn-Stream-Seq": "9",
               "Cairn-Subject": f"cairn.in.{tenant}.message", "Cairn-Deliveries": "1"}  # fmt: skip
    parked = await js.publish(dead_letter_subject(consumer, tenant), b"", headers=headers)
    (letter,) = await dead_letters(js, tenant=tenant)
    assert (letter.seq, letter.consumer, letter.tenant, letter.data) == (parked.seq, consumer, tenant, b"")
    with pytest.raises(NotRetryable, match="payload was not kept"):
        await retry(js, parked.seq)
    assert (await dead_letter(js, parked.seq)).reason == "refused: holds a secret", "still there to discard"
    assert (await discard(js, parked.seq)).seq == parked.seq
    assert await count_dead_letters(js, tenant=tenant) == {}


async def test_a_tenants_counts_are_read_from_the_subjects_per_consumer_and_no_tenant_is_nobodys(
    nats_client: Client,
) -> None:
    """`count_dead_letters(js, tenant)` asks the stream for `cairn-dead-letter.*.<tenant>`: another tenant's letters
    and those parked under `-` (a message naming no tenant) are not counted, all of them are without a tenant."""
    js, tenant, other = nats_client.jetstream(), str(uuid.uuid4()), str(uuid.uuid4())
    first, second = f"test-{uuid.uuid4().hex[:12]}", f"test-{uuid.uuid4().hex[:12]}"
    parked = [(first, tenant), (first, tenant), (second, tenant), (first, other), (first, None), (second, None)]
    for consumer, owner in parked:
        await js.publish(dead_letter_subject(consumer, owner), b"", headers={"Cairn-Error": "refused"})
    assert await count_dead_letters(js, tenant) == {first: 2, second: 1}
    assert await count_dead_letters(js, other) == {first: 1}
    everyone = await count_dead_letters(js)
    assert (everyone[first], everyone[second]) == (4, 2)
    assert [letter.consumer for letter in await dead_letters(js, tenant=tenant)] == [first, first, second]
    assert len(await dead_letters(js, consumer=second)) == 2, "a consumer's letters, of every tenant and of none"
    with pytest.raises(ValueError, match="not a tenant id"):
        await count_dead_letters(js, "*")
