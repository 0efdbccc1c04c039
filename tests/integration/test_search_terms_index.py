"""The messages' tenant-keyed full-text index keeps no pending list (migration 0054): a message the indexer writes
is merged into the GIN structure at once, so a search that reads the keys never scans a backlog of unsorted new
entries (of every tenant). The control turns the default (fastupdate) back on and sees the list fill.

In a database of its own: the check needs pgstattuple (a superuser's extension) and flips an index option."""

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from pydantic import SecretStr

from cairn.indexer import store
from cairn.local import LocalStack
from cairn.platform.postgres import create_pool, tenant_transaction
from cairn.platform.settings import PostgresSettings
from cairn.recall.queries import Page, ReadStore, Scope
from cairn.text import build_query
from tests.integration.conftest import own_database_with_pgstattuple
from tests.integration.test_search_suite import _message

pytestmark = pytest.mark.integration

INDEX = "indexer.messages_tenant_terms"
PENDING = f"SELECT pending_tuples FROM pgstatginindex('{INDEX}')"


@pytest.fixture(scope="module")
async def database(stack: LocalStack) -> AsyncIterator[tuple[str, "asyncpg.Connection[asyncpg.Record]"]]:
    async with own_database_with_pgstattuple(stack, "cairn_msg_terms") as opened:
        yield opened


async def _write_messages(url: str, tenant: str, texts: list[str]) -> None:
    """Through the indexer's own write path, as cairn_app; each is found by a search at once."""
    start = datetime(2026, 11, 2, tzinfo=UTC)
    rows = [
        store.message_row(_message(tenant, f"m{i}", text, None, start + timedelta(seconds=i), i))
        for i, text in enumerate(texts, 1)
    ]
    pool = await create_pool(PostgresSettings(url=SecretStr(url), pool_min=1, pool_max=2))
    try:
        async with tenant_transaction(pool, tenant) as conn:
            await store.insert_messages(conn, rows)
        built = build_query(texts[-1])
        assert built is not None
        hits = await ReadStore(pool).search_messages(tenant, Scope(None, None), built, Page(5, 0, 1000))
        assert hits[0].text == texts[-1]  # searchable at once either way
    finally:
        await pool.close()


async def test_written_messages_go_straight_into_the_index(
    database: tuple[str, "asyncpg.Connection[asyncpg.Record]"],
) -> None:
    url, superuser = database
    await _write_messages(url, str(uuid.uuid4()), [f"the lighthouse keeper wrote entry {i}" for i in range(30)])
    assert await superuser.fetchval(PENDING) == 0


async def test_control_with_the_default_pending_list_the_entries_wait(
    database: tuple[str, "asyncpg.Connection[asyncpg.Record]"],
) -> None:
    url, superuser = database
    await superuser.execute(f"ALTER INDEX {INDEX} SET (fastupdate = on)")
    try:
        await _write_messages(url, str(uuid.uuid4()), [f"the harbour master logged parcel {i}" for i in range(30)])
        assert await superuser.fetchval(PENDING) > 0
    finally:
        await superuser.execute(f"ALTER INDEX {INDEX} SET (fastupdate = off)")
        await superuser.execute(f"SELECT gin_clean_pending_list('{INDEX}'::regclass)")
