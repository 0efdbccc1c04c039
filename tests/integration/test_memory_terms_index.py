"""The memory chunks' full-text index keeps no pending list (migration 0045): a chunk the indexer writes is
merged into the GIN structure at once, so a search that reads the index never scans a backlog of unsorted
new entries. The control turns the default (fastupdate) back on and sees the list fill.

In a database of its own: the check needs pgstattuple (a superuser's extension) and flips an index option."""

import hashlib
import uuid
from collections.abc import AsyncIterator

import asyncpg
import numpy as np
import pytest
from pydantic import SecretStr

from cairn.local import LocalStack
from cairn.memindex import store
from cairn.recall.memory_queries import MemoryReads, Where
from cairn.storage.postgres import create_pool, tenant_transaction
from cairn.storage.settings import PostgresSettings
from cairn.text import build_query, index_terms, to_tsvector_literal
from tests.integration.conftest import own_database_with_pgstattuple

pytestmark = pytest.mark.integration

INDEX = "indexer.memory_chunk_keys_terms"
PENDING = f"SELECT pending_tuples FROM pgstatginindex('{INDEX}')"


@pytest.fixture(scope="module")
async def database(stack: LocalStack) -> AsyncIterator[tuple[str, "asyncpg.Connection[asyncpg.Record]"]]:
    async with own_database_with_pgstattuple(stack, "cairn_terms") as opened:
        yield opened


async def _write_chunks(url: str, tenant: str, texts: list[str]) -> None:
    """Through the indexer's own write path, as cairn_app."""
    rows = [
        store.ChunkRow("memory", path="memory/bank/notes.md", start_line=i, end_line=i, text=text,
                       terms=to_tsvector_literal(index_terms(text)),
                       content_hash=hashlib.sha256(text.encode()).digest())
        for i, text in enumerate(texts, 1)
    ]  # fmt: skip
    vectors = np.eye(len(texts), 8, dtype=np.float32)
    pool = await create_pool(PostgresSettings(url=SecretStr(url), pool_min=1, pool_max=2))
    try:
        async with tenant_transaction(pool, tenant) as conn:
            await store.insert_chunks(conn, uuid.UUID(tenant), "main", rows, "test-model", vectors)
        built = build_query(texts[0])
        assert built is not None
        found = await MemoryReads(pool).lexical(
            Where(tenant, "main", ("memory",), None), built.any_terms, built.all_terms, 10
        )
        assert found  # searchable at once either way
    finally:
        await pool.close()


async def test_written_chunks_go_straight_into_the_index(
    database: tuple[str, "asyncpg.Connection[asyncpg.Record]"],
) -> None:
    url, superuser = database
    await _write_chunks(url, str(uuid.uuid4()), [f"the lighthouse keeper wrote note {i}" for i in range(30)])
    assert await superuser.fetchval(PENDING) == 0


async def test_control_with_the_default_pending_list_the_entries_wait(
    database: tuple[str, "asyncpg.Connection[asyncpg.Record]"],
) -> None:
    url, superuser = database
    await superuser.execute(f"ALTER INDEX {INDEX} SET (fastupdate = on)")
    try:
        await _write_chunks(url, str(uuid.uuid4()), [f"the harbour master logged parcel {i}" for i in range(30)])
        assert await superuser.fetchval(PENDING) > 0
    finally:
        await superuser.execute(f"ALTER INDEX {INDEX} SET (fastupdate = off)")
        await superuser.execute(f"SELECT gin_clean_pending_list('{INDEX}')")
