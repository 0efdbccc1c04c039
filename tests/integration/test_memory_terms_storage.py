"""A long chunk's lexemes are kept in its row (migration 0090), where matching, ranking and details read them
without a trip to the TOAST table; chunks written before (terms in the TOAST table) answer the same."""

import random
import uuid
from dataclasses import asdict
from typing import Any, TypeAlias

import asyncpg
import numpy as np
import pytest

from cairn.memindex import store
from cairn.recall.memory_queries import ChunkDetail, MemoryReads, Where
from cairn.text import build_query
from tests.integration.test_memory_reads import DIMS, MODEL, _row, _write

pytestmark = pytest.mark.integration

Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"
Admin: TypeAlias = "asyncpg.Connection[asyncpg.Record]"

WORDS = [
    "harbour",
    "lighthouse",
    "keeper",
    "parcel",
    "bicycle",
    "garden",
    "allergy",
    "football",
    "ticket",
    "museum",
    "recipe",
    "invoice",
    "meeting",
    "umbrella",
    "weather",
    "doctor",
    "family",
    "school",
    "concert",
    "hotel",
    "contract",
    "dentist",
    "marathon",
    "budget",
    "launch",
]
STORED = """
SELECT text, pg_column_size(terms) AS size, pg_column_toast_chunk_id(terms) IS NOT NULL AS out_of_row
FROM indexer.memory_chunks WHERE tenant_id = $1
"""
ATTSTORAGE = "SELECT attstorage FROM pg_attribute WHERE attrelid = 'indexer.memory_chunks'::regclass AND attname = $1"
STORAGE = {b"p": "PLAIN", b"e": "EXTERNAL", b"m": "MAIN", b"x": "EXTENDED"}


def _long_text(seed: int) -> str:
    """About 400 tokens: shared words (what queries find) among a few hundred distinct ones (terms over 2 kB)."""
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) if rng.random() < 0.3 else f"w{seed}x{rng.randrange(10**6)}" for _ in range(360))


async def _stored(admin: Admin, tenant: str) -> dict[str, asyncpg.Record]:
    return {r["text"]: r for r in await admin.fetch(STORED, uuid.UUID(tenant))}


async def test_a_long_chunks_terms_are_kept_in_its_row_where_the_default_would_move_them_out(
    app_pool: Pool, admin: Admin
) -> None:
    tenant = str(uuid.uuid4())
    texts = [_long_text(seed) for seed in range(3)]
    await _write(app_pool, tenant, [_row(text, minutes) for minutes, text in enumerate(texts)])
    assert STORAGE[await admin.fetchval(ATTSTORAGE, "terms")] == "MAIN"
    stored = await _stored(admin, tenant)
    assert all(r["size"] > 2100 and not r["out_of_row"] for r in stored.values()), stored
    # The control: the same rows in a table whose terms have the default storage go to its TOAST table.
    async with admin.transaction():
        await admin.execute("CREATE TEMP TABLE default_storage (LIKE indexer.memory_chunks) ON COMMIT DROP")
        await admin.execute("INSERT INTO default_storage SELECT * FROM indexer.memory_chunks WHERE tenant_id = $1",
                            uuid.UUID(tenant))  # fmt: skip
        moved = await admin.fetchval("""SELECT count(*) FROM default_storage
                                        WHERE pg_column_toast_chunk_id(terms) IS NOT NULL""")  # fmt: skip
        assert moved == len(texts)


async def _write_as_before_0090(admin: Admin, tenant: str, rows: list[store.ChunkRow]) -> None:
    """Rows written while terms had the default storage (one transaction: nobody sees the column's storage
    change; the vectors are `_write`'s, the same seed)."""
    vectors = np.random.default_rng(3).normal(size=(len(rows), DIMS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    async with admin.transaction():
        storage = STORAGE[await admin.fetchval(ATTSTORAGE, "terms")]
        await admin.execute("ALTER TABLE indexer.memory_chunks ALTER COLUMN terms SET STORAGE EXTENDED")
        await store.insert_chunks(admin, uuid.UUID(tenant), "main", rows, MODEL, vectors)
        await admin.execute(f"ALTER TABLE indexer.memory_chunks ALTER COLUMN terms SET STORAGE {storage}")


def _comparable(detail: ChunkDetail) -> dict[str, Any]:
    """A candidate's details without what differs between two tenants' copies of a chunk (its ids)."""
    fields = asdict(detail)
    del fields["chunk_id"], fields["session_id"]
    fields["embedding"] = None if detail.embedding is None else detail.embedding.tobytes()
    return fields


async def test_chunks_whose_terms_were_moved_out_before_answer_the_same(app_pool: Pool, admin: Admin) -> None:
    """The same chunks written before 0090 (terms in the TOAST table) and after (in the row): every lexical
    candidate, score and detail the same, for queries of every word, any word, and words no chunk holds."""
    texts = [_long_text(seed) for seed in range(12)]
    texts += ["the lighthouse keeper retired", "a parcel for the harbour office"]  # short: in the row either way
    rows = [_row(text, minutes) for minutes, text in enumerate(texts)]
    before, after = str(uuid.uuid4()), str(uuid.uuid4())
    await _write_as_before_0090(admin, before, rows)
    await _write(app_pool, after, rows)
    moved_out = {text for text, r in (await _stored(admin, before)).items() if r["out_of_row"]}
    assert moved_out == set(texts[:12])
    assert not any(r["out_of_row"] for r in (await _stored(admin, after)).values())
    reads = MemoryReads(app_pool)
    queries = ["lighthouse keeper", "parcel bicycle garden allergy", "harbour museum umbrella weather budget",
               "retired", "zeppelin", "w3x nothing like this"]  # fmt: skip
    compared = 0
    for query in queries:
        built = build_query(query)
        assert built is not None
        answers = []
        for tenant in (before, after):
            where = Where(tenant, "main", ("memory", "sessions"), None)
            scores, found = await reads.lexical_rows(where, built.any_terms, built.all_terms, 24, MODEL,
                                                     list(built.terms))  # fmt: skip
            by_text = {d.text: (scores[d.chunk_id], _comparable(d)) for d in found}
            answers.append(by_text)
        assert answers[0] == answers[1], query
        compared += len(answers[0])
    assert compared > 20  # most queries found several chunks
