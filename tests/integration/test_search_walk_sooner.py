"""A common term is walked to from the newest messages sooner (migration 0069): a row fetched through the keys
counts as four walked rows when the estimate is the planner's own, so a term whose matches are between
sqrt(size·cap/4) and sqrt(size·cap) is walked — and answers the same newest `cap` matches — while the every-term
search's hinted estimate keeps the even weighing."""

import uuid
from typing import TypeAlias

import asyncpg
import pytest

from cairn.indexer import store
from cairn.platform.postgres import tenant_transaction
from tests.integration.test_search_keys import _row, plans_of_every_statement

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
Admin: TypeAlias = "asyncpg.Connection[asyncpg.Record]"

MATCHING = "SELECT message_id FROM indexer.matching_messages($1, 'walrus', NULL, NULL, $2)"
HINTED = "SELECT message_id FROM indexer.matching_messages($1, 'walrus', NULL, NULL, $2, NULL, NULL, 'walrus', 1.0)"
NEWEST = """
SELECT message_id FROM indexer.messages WHERE tenant_id = $1 AND terms @@ 'walrus'
ORDER BY occurred_at DESC, message_id LIMIT $2
"""


async def test_a_term_in_a_fifth_of_the_messages_is_walked_unless_the_estimate_is_a_hint(
    app_pool: Pool, admin: Admin
) -> None:
    tenant = str(uuid.uuid4())
    texts = [f"routine chat {index}" + (" walrus" if index % 5 == 0 else "") for index in range(1, 3001)]
    rows = [_row(tenant, index, text) for index, text in enumerate(texts, 1)]
    async with tenant_transaction(app_pool, tenant) as conn:
        await store.insert_messages(conn, rows)
    await admin.execute("ANALYZE indexer.messages")
    await admin.execute("SELECT set_config('cairn.tenant_id', $1, false)", tenant)
    estimate = await admin.fetchval(
        "SELECT least(indexer.estimated_matches(indexer.tenant_terms_query($1, 'walrus')), 3000)", uuid.UUID(tenant)
    )
    # a cap for which the even weighing reads the keys and four to one walks
    cap = round(2 * estimate * estimate / 3000)
    assert estimate * estimate < 3000 * cap < 4 * estimate * estimate, estimate
    plans = await plans_of_every_statement(admin)
    walked = [r["message_id"] for r in await admin.fetch(MATCHING, uuid.UUID(tenant), cap)]
    assert any("LIMIT visits" in plan for plan in plans), "\n".join(plans)
    assert not any("LIMIT wanted" in plan for plan in plans), "\n".join(plans)  # the walk found them all
    newest = [r["message_id"] for r in await admin.fetch(NEWEST, uuid.UUID(tenant), cap)]
    assert walked == newest
    assert len(walked) == min(cap, 600)

    plans.clear()
    hinted = [r["message_id"] for r in await admin.fetch(HINTED, uuid.UUID(tenant), cap)]
    assert not any("LIMIT visits" in plan for plan in plans), "\n".join(plans)
    assert any("LIMIT wanted" in plan for plan in plans), "\n".join(plans)
    assert hinted == newest
