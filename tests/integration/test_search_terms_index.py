"""The messages' tenant-keyed full-text index keeps a small pending list (migration 0136, after 0054 had none): a
message the indexer writes waits there with others until the list passes 256 kB, then the batch is merged into the
GIN structure in key order, which costs Postgres less than one descent per key of every row. A search reads the
whole list, so it is kept small. The control sets the default limit (4 MB) and sees the same writes leave more.

In a database of its own: the check needs pgstattuple (a superuser's extension) and flips an index option."""

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from pydantic import SecretStr

from cairn.indexer import store
from cairn.local import LocalStack
from cairn.recall.queries import Page, ReadStore, Scope
from cairn.storage.postgres import create_pool, tenant_transaction
from cairn.storage.settings import PostgresSettings
from cairn.text import build_query
from tests.integration.conftest import own_database_with_pgstattuple
from tests.integration.test_search_suite import _message

pytestmark = pytest.mark.integration

INDEX = "indexer.messages_tenant_terms"
PENDING = f"SELECT pending_tuples, pending_pages FROM pgstatginindex('{INDEX}')"
LIMIT_PAGES = 256 // 8  # gin_pending_list_limit 256 kB in 8 kB pages


@pytest.fixture(scope="module")
async def database(stack: LocalStack) -> AsyncIterator[tuple[str, "asyncpg.Connection[asyncpg.Record]"]]:
    async with own_database_with_pgstattuple(stack, "cairn_msg_terms") as opened:
        yield opened


async def _write_messages(url: str, tenant: str, texts: list[str]) -> None:
    """Through the indexer's own write path, as cairn_app; the last is found by a search at once."""
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
        assert hits[0].text == texts[-1]  # searchable at once, from the pending list or the tree
    finally:
        await pool.close()


async def _pending(superuser: "asyncpg.Connection[asyncpg.Record]") -> tuple[int, int]:
    """The list's tuples and pages."""
    row = await superuser.fetchrow(PENDING)
    assert row is not None
    return int(row["pending_tuples"]), int(row["pending_pages"])


def _texts(count: int) -> list[str]:
    """Messages of distinct words, so that each brings keys of its own into the list."""
    return [f"parcel {i} harbour{i} lighthouse{i % 97} keeper{i % 89} entry{i * 7}" for i in range(count)]


async def test_written_messages_wait_in_a_small_pending_list(
    database: tuple[str, "asyncpg.Connection[asyncpg.Record]"],
) -> None:
    url, superuser = database
    await superuser.execute(f"SELECT gin_clean_pending_list('{INDEX}'::regclass)")
    await _write_messages(url, str(uuid.uuid4()), _texts(30))
    tuples, _ = await _pending(superuser)
    assert tuples > 0
    await _write_messages(url, str(uuid.uuid4()), _texts(4000))  # far more than 256 kB of keys
    tuples, pages = await _pending(superuser)
    assert 0 < pages <= LIMIT_PAGES + 1  # merged whenever it passed the limit (a row may tip it over)


async def test_control_with_the_default_limit_the_list_grows_past_it(
    database: tuple[str, "asyncpg.Connection[asyncpg.Record]"],
) -> None:
    url, superuser = database
    await superuser.execute(f"SELECT gin_clean_pending_list('{INDEX}'::regclass)")
    await superuser.execute(f"ALTER INDEX {INDEX} RESET (gin_pending_list_limit)")
    try:
        await _write_messages(url, str(uuid.uuid4()), _texts(4000))
        _, pages = await _pending(superuser)
        assert pages > LIMIT_PAGES + 1
    finally:
        await superuser.execute(f"ALTER INDEX {INDEX} SET (gin_pending_list_limit = 256)")
        await superuser.execute(f"SELECT gin_clean_pending_list('{INDEX}'::regclass)")
