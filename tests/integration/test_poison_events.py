"""A poison event, one Postgres refuses for good (a CHECK constraint: SQLSTATE 23514), among good events of its
own tenant and of another: it is dead-lettered at its first delivery with Postgres's reason, and every good
event, those after it in its own tenant's stream included, is applied exactly once. Per tenant (cairn_app) and
with the whole batch in one transaction (cairn_projector)."""

import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any, TypeAlias

import asyncpg
import pytest
from nats.aio.client import Client

from cairn.delivery.consumer import Delivery, PerEvent
from cairn.delivery.publisher import EventPublisher
from cairn.delivery.settings import NatsSettings
from cairn.events import DEAD_LETTER_STREAM, RECALL_STREAM, Event, RecallPerformed, dead_letter_subject, encode_event
from cairn.local import LocalStack
from cairn.storage.postgres import tenant_transaction
from tests.integration.conftest import eventually
from tests.integration.test_projection import running, settled
from tests.streams import stream_messages

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
# A budget of 5 deliveries: a dead letter after the first shows it was not spent on retries.
PATIENT = NatsSettings(max_deliver=5, ack_wait_s=1, fetch_batch=64)
LIMIT = 100


@pytest.fixture(scope="module")
async def table(stack: LocalStack) -> AsyncIterator[str]:
    """Rows with a limit Postgres enforces; no unique key, so a second application would show as a second row."""
    schema = f"poison_test_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        await conn.execute(
            f"""
            CREATE SCHEMA {schema};
            CREATE TABLE {schema}.recalls (tenant_id uuid NOT NULL, event_id uuid NOT NULL,
                items int NOT NULL CHECK (items < {LIMIT}));
            ALTER TABLE {schema}.recalls ENABLE ROW LEVEL SECURITY;
            ALTER TABLE {schema}.recalls FORCE ROW LEVEL SECURITY;
            CREATE POLICY tenant_isolation ON {schema}.recalls
                USING (tenant_id = cairn.current_tenant()) WITH CHECK (tenant_id = cairn.current_tenant());
            GRANT USAGE ON SCHEMA {schema} TO cairn_app;
            GRANT SELECT, INSERT ON {schema}.recalls TO cairn_app;
            SELECT cairn.admit_tenant_batches('{schema}.recalls');
            """
        )
        yield f"{schema}.recalls"
    finally:
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await conn.close()


class Storing:
    """Stores each of its tenants' recalls; Postgres refuses one with too many items."""

    def __init__(self, table: str, tenants: set[str]) -> None:
        self.table, self.tenants = table, tenants

    async def __call__(self, conn: Any, event: RecallPerformed, delivery: Delivery) -> Sequence[Event]:
        if event.tenant_id in self.tenants:
            await conn.execute(
                f"INSERT INTO {self.table} (tenant_id, event_id, items) VALUES ($1, $2, $3)",
                uuid.UUID(event.tenant_id), uuid.UUID(event.event_id), event.items,
            )  # fmt: skip
        return []


async def stored(pool: Pool, table: str, tenant: str) -> list[str]:
    async with tenant_transaction(pool, tenant) as conn:
        return [str(r["event_id"]) for r in await conn.fetch(f"SELECT event_id FROM {table} ORDER BY ctid")]


@pytest.mark.parametrize("role", ["app", "projector"])
async def test_a_poison_event_is_dead_lettered_at_once_and_every_good_one_applies(
    nats_client: Client, app_pool: Pool, projector_pool: Pool, table: str, role: str
) -> None:
    js, a, b, agent = nats_client.jetstream(), str(uuid.uuid4()), str(uuid.uuid4()), f"a{uuid.uuid4().hex[:8]}"

    def recall(tenant: str, items: int = 2) -> RecallPerformed:
        return RecallPerformed(tenant_id=tenant, agent_id=agent, session_key=f"agent:{agent}:main", outcome="none",
                               items=items)  # fmt: skip

    poison = recall(a, items=LIMIT + 1)
    events = [recall(a), recall(b), poison, recall(a), recall(b), recall(a)]
    publisher = EventPublisher(js)
    seqs = [(await publisher.publish(event)).seq for event in events]  # all in the first fetch
    handlers = PerEvent({RecallPerformed: Storing(table, {a, b})}, across_tenants=role == "projector")
    pool = projector_pool if role == "projector" else app_pool
    filter_subject = f"cairn.*.{agent}.recall.performed"
    async with running(js, RECALL_STREAM, handlers, pool, PATIENT, filter_subject=filter_subject) as projection:
        dead = dead_letter_subject(projection.consumer, "*")
        letters = await eventually(lambda: stream_messages(js, DEAD_LETTER_STREAM, dead))
        assert await eventually(lambda: settled(js, projection, seqs[-1]))
    assert await stored(app_pool, table, a) == [e.event_id for e in events if e.tenant_id == a and e is not poison]
    assert await stored(app_pool, table, b) == [e.event_id for e in events if e.tenant_id == b]
    (letter,) = letters
    assert letter.data == encode_event(poison)
    headers = letter.headers or {}
    assert headers["Cairn-Error"].startswith("CheckViolationError: "), headers["Cairn-Error"]
    assert "recalls_items_check" in headers["Cairn-Error"], "Postgres's own reason, naming the constraint"
    assert headers["Cairn-Deliveries"] == "1", "deterministic: dead-lettered at once, not after the budget"
    assert headers["Cairn-Stream-Seq"] == str(seqs[2])
