"""`cairn bench memindex`: the memory index's speed, three figures.

- `embedding`: texts/s of the default local provider (one thread), for chat-turn-sized and
  chunk-sized texts, batched, next to one text per call in the same process (the ratio is what batching
  buys on this machine).
- `search`: p50/p99 of `POST /v1/memory/search` through HTTP (query embedding included) for an agent
  with 100,000 chunks, seeded directly in SQL (synthetic text, clustered vectors) as the schema owner;
  the 512-d HNSW index is rebuilt after the bulk load, as a bulk import would. A baseline in the same
  run: the same searches for an agent with 20 chunks (the exact-scan path). The text is either the worst
  case for the lexical side (a 38-word vocabulary) or, with `--data`, conversation turns of a dataset
  asked its questions.
- `lag`: p50/p99 of a document edit's indexing lag: from sending `PUT /v1/memory/files/{path}` until a
  search consistent with the write finds the edit (chunking, embedding and HNSW insertion included).
"""

import asyncio
import hashlib
import json
import random
import statistics
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from cairn.cli.bench import new_tenant
from cairn.cli.endpoints import postgres_as
from cairn.memindex import LocalEmbedder
from cairn.text import index_terms, to_tsvector_text

VOCABULARY = [
    "harbour",
    "lighthouse",
    "budget",
    "launch",
    "parcel",
    "slides",
    "garden",
    "recipe",
    "piano",
    "marathon",
    "ticket",
    "invoice",
    "museum",
    "holiday",
    "meeting",
    "dentist",
    "birthday",
    "project",
    "release",
    "contract",
    "flight",
    "hotel",
    "concert",
    "painting",
    "football",
    "allergy",
    "peanuts",
    "coffee",
    "tea",
    "weekend",
    "family",
    "school",
    "teacher",
    "doctor",
    "weather",
    "umbrella",
    "bicycle",
    "train",
]


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(VOCABULARY) for _ in range(words))


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 2),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 2),
    }


def run_embedding(texts: int = 512) -> list[dict[str, Any]]:
    embedder = LocalEmbedder()
    started = time.perf_counter()
    embedder.load()
    load_s = time.perf_counter() - started
    rng = random.Random(7)
    rows = []
    for label, words in (("turn (~20 words)", 20), ("chunk (~300 words, 400 tokens)", 300)):
        batch = [_sentence(rng, words) for _ in range(texts if words < 100 else texts // 4)]
        started = time.perf_counter()
        for first in range(0, len(batch), 64):
            embedder.encode(batch[first : first + 64])
        batched = len(batch) / (time.perf_counter() - started)
        singles = batch[:32]
        started = time.perf_counter()
        for text in singles:
            embedder.encode([text])
        one_by_one = len(singles) / (time.perf_counter() - started)
        rows.append({"texts": label, "batched_per_s": round(batched, 1), "one_per_call_per_s": round(one_by_one, 1),
                     "batching_gain": round(batched / one_by_one, 2), "model_load_s": round(load_s, 2)})  # fmt: skip
    return rows


# Each chunk is `$4` random picks from the `pieces` table joined by `$5`; its terms are the picks' lexemes (the
# application tokenizer's output for each piece) under to_tsvector('simple'), which keeps them as they are.
SEED = """
INSERT INTO indexer.memory_chunks (tenant_id, agent_id, source, path, start_line, end_line, text, terms,
    content_hash, model, dims, embedding)
SELECT $1, 'main', 'memory', 'memory/bank/bench-' || (g / 50) || '.md', g % 50 + 1, g % 50 + 1, t.text,
       to_tsvector('simple', t.terms), '\\x00', $2, 512, c.v + n.v
FROM generate_series(0, $3 - 1) g
CROSS JOIN LATERAL (SELECT string_agg(p.piece, $5) AS text, string_agg(p.terms, ' ') AS terms
                    FROM (SELECT 1 + floor(random() * (SELECT count(*) FROM pieces))::int AS i
                          FROM generate_series(1, $4) WHERE g >= 0) pick
                    JOIN pieces p ON p.i = pick.i) t
JOIN centres c ON c.c = g % 256 JOIN noise n ON n.n = (g * 7919) % 1000
"""
PIECES = """
CREATE TEMP TABLE pieces AS
SELECT i::int, piece, terms FROM unnest($1::text[], $2::text[]) WITH ORDINALITY u(piece, terms, i)
"""
INDEX_PIECES = "CREATE INDEX ON pieces (i); ANALYZE pieces"
SEED_TABLES = """
CREATE TEMP TABLE centres AS SELECT c, (SELECT array_agg(random() - 0.5)::real[]::vector
    FROM generate_series(1, 512) WHERE c >= 0) AS v FROM generate_series(0, 255) c;
CREATE TEMP TABLE noise AS SELECT n, (SELECT array_agg((random() - 0.5) * 0.6)::real[]::vector
    FROM generate_series(1, 512) WHERE n >= 0) AS v FROM generate_series(0, 999) n;
"""
# The 512-d HNSW index is dropped before the bulk load and built after it, as a bulk import would: inserting
# 100,000 rows one graph insertion at a time takes many times longer.
DROP_HNSW = "DROP INDEX IF EXISTS indexer.memory_chunks_hnsw_512"
BUILD_HNSW = """
SET maintenance_work_mem = '1GB';
CREATE INDEX memory_chunks_hnsw_512 ON indexer.memory_chunks
    USING hnsw ((embedding::vector(512)) vector_cosine_ops) WHERE dims = 512;
"""
# What autovacuum does to live tables before long, done before timing: statistics, and the visibility map that
# lets a walk by term bits read the recency index alone (indexer.memory_matches_walking_by_bits) instead of every row's
# page. The chunks' full-text keys live in a table of their own (indexer.memory_chunk_keys), filled by trigger: it is
# settled with them.
SETTLE = "VACUUM (ANALYZE) indexer.memory_chunks, indexer.memory_chunk_keys"
COUNT = """
INSERT INTO indexer.memory_counts (tenant_id, agent_id, chunks) VALUES ($1, 'main', $2)
ON CONFLICT (tenant_id, agent_id) DO UPDATE SET chunks = excluded.chunks
"""


@dataclass(frozen=True)
class Text:
    """What seeded chunks and queries are made of: `picks` random pieces per chunk, joined by `joiner`."""

    label: str
    pieces: list[str]
    picks: int
    joiner: str
    queries: list[str]


def synthetic_text(rng: random.Random, queries: int) -> Text:
    """The worst case for the lexical side: 40 words of a 38-word vocabulary, so every query word matches
    nearly every chunk."""
    asked = [_sentence(rng, rng.choice([3, 6, 10])) for _ in range(queries)]
    return Text("synthetic (38 words)", VOCABULARY, 40, " ", asked)


def conversation_text(rng: random.Random, queries: int, data: Path) -> Text:
    """Realistic text: each chunk is 20 turns (`Speaker: text` lines) drawn from a conversation dataset, the
    queries are its questions (a Zipf-like vocabulary: names frequent, most words rare)."""
    turns = [json.loads(line) for line in (data / "corpus.jsonl").read_text().splitlines() if line.strip()]
    questions = [json.loads(line)["question"] for line in (data / "questions.jsonl").read_text().splitlines() if line]
    lines = [f"{turn['speaker']}: {turn['text']}" for turn in turns]
    return Text(f"conversations ({data.name})", lines, 20, "\n", [rng.choice(questions) for _ in range(queries)])


async def _seed(owner_url: str, tenant: str, model: str, chunks: int, text: Text) -> None:
    terms = [to_tsvector_text(index_terms(piece)) for piece in text.pieces]
    conn = await asyncpg.connect(owner_url)
    try:
        await conn.execute(SEED_TABLES)
        await conn.execute(PIECES, text.pieces, terms)
        await conn.execute(INDEX_PIECES)
        await conn.execute(DROP_HNSW)
        async with conn.transaction():
            await conn.execute("SELECT set_config('cairn.tenant_id', $1, true)", tenant)
            for first in range(0, chunks, 20_000):
                size = min(20_000, chunks - first)
                await conn.execute(SEED, uuid.UUID(tenant), model, size, text.picks, text.joiner)
            await conn.execute(COUNT, uuid.UUID(tenant), chunks)
        await conn.execute(BUILD_HNSW)
        await conn.execute(SETTLE)
    finally:
        await conn.close()


def _time_searches(recall: httpx.Client, queries: list[str]) -> list[float]:
    recall.post("/v1/memory/search", json={"query": queries[0]}).raise_for_status()  # warm up
    samples = []
    for query in queries:
        started = time.perf_counter()
        recall.post("/v1/memory/search", json={"query": query}).raise_for_status()
        samples.append(time.perf_counter() - started)
    return samples


async def _settle(owner_url: str) -> None:
    conn = await asyncpg.connect(owner_url)
    try:
        await conn.execute(SETTLE)
    finally:
        await conn.close()


def _seeded_key(endpoints: dict[str, str], owner_url: str, size: int, text: Text, keep: Path | None) -> tuple[str, str]:
    """An API key for an agent holding `size` chunks of `text`, and how it came to be. With `keep` (a JSON file),
    an agent this database already holds from an earlier run with the same size and text is reused (its key
    is read from the file; the table is settled again as autovacuum would); otherwise one is seeded (and, with
    `keep`, remembered)."""
    seed_id = f"{size}:{text.label}:{hashlib.sha256(json.dumps(text.pieces).encode()).hexdigest()[:16]}"
    kept = json.loads(keep.read_text()) if keep is not None and keep.exists() else {}
    key = kept.get(seed_id)
    if key is not None:
        # status counts the agent's chunks: seconds at 100k on a cold cache (httpx's default waits 5 s)
        with httpx.Client(base_url=endpoints["CAIRN_RECALL_URL"], headers={"Authorization": f"Bearer {key}"},
                          timeout=120) as r:  # fmt: skip
            if r.get("/v1/memory/status").status_code == 200 and asyncio.run(_chunks_of(owner_url, key)) == size:
                asyncio.run(_settle(owner_url))
                return key, "reused (settled: VACUUM ANALYZE)"
    key = new_tenant(endpoints, f"bench-memory-{size}")
    with httpx.Client(base_url=endpoints["CAIRN_RECALL_URL"], headers={"Authorization": f"Bearer {key}"}) as r:
        model = r.get("/v1/memory/status").raise_for_status().json()["model"]
    started = time.perf_counter()
    asyncio.run(_seed(owner_url, asyncio.run(_tenant_of(owner_url, key)), model, size, text))
    how = f"seeded in {time.perf_counter() - started:.1f} s (settled: VACUUM ANALYZE)"
    if keep is not None:
        keep.write_text(json.dumps({**kept, seed_id: key}, indent=1))
    return key, how


def run_search(
    endpoints: dict[str, str], chunks: int, queries: int, data: Path | None = None, keep: Path | None = None
) -> list[dict[str, Any]]:
    """Synthetic text by default; with `data` (a dataset folder of corpus.jsonl and questions.jsonl), realistic
    text made of its conversation turns, asked its questions. With `keep`, seeded agents are reused across runs
    on the same database (see `_seeded_key`)."""
    owner_url = postgres_as(endpoints, "cairn_owner")
    rng = random.Random(11)
    text = synthetic_text(rng, queries) if data is None else conversation_text(rng, queries, data)
    rows = []
    for label, size in (("baseline: 20 chunks (exact scan)", 20), (f"{chunks:,} chunks (HNSW)", chunks)):
        key, how = _seeded_key(endpoints, owner_url, size, text, keep)
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=endpoints["CAIRN_RECALL_URL"], headers=headers, timeout=60) as recall:
            rows.append({"agent": label, "text": text.label, **_percentiles(_time_searches(recall, text.queries)),
                         "queries": queries, "seed": how})  # fmt: skip
    return rows


async def _chunks_of(owner_url: str, api_key: str) -> int:
    """How many live chunks the key's tenant holds (0 when the key is unknown)."""
    conn = await asyncpg.connect(owner_url)
    try:
        tenant = await conn.fetchval("SELECT ingest.authenticate($1)", hashlib.sha256(api_key.encode()).digest())
        if tenant is None:
            return 0
        await conn.execute("SELECT set_config('cairn.tenant_id', $1, false)", str(tenant))
        count: int = await conn.fetchval("SELECT count(*) FROM indexer.memory_chunks WHERE tenant_id = $1", tenant)
    finally:
        await conn.close()
    return count


async def _tenant_of(owner_url: str, api_key: str) -> str:
    """The tenant a fresh key belongs to (the admin API answers with the key only)."""
    conn = await asyncpg.connect(owner_url)
    try:
        tenant = await conn.fetchval("SELECT ingest.authenticate($1)", hashlib.sha256(api_key.encode()).digest())
    finally:
        await conn.close()
    return str(tenant)


def run_lag(endpoints: dict[str, str], edits: int, path: str = "memory/bank/lag.md") -> list[dict[str, Any]]:
    """A 61-item document (`path`: a bank file, or a daily note with `--lag-path`) edited `edits` times."""
    key = new_tenant(endpoints, "bench-memory-lag")
    headers = {"Authorization": f"Bearer {key}"}
    rng = random.Random(5)
    body = "\n".join(f"- {_sentence(rng, 12)}" for _ in range(60))  # 60 entries (a daily note: 4 windows once)
    samples = []
    with (
        httpx.Client(base_url=endpoints["CAIRN_INGEST_URL"], headers=headers, timeout=60) as ingest,
        httpx.Client(base_url=endpoints["CAIRN_RECALL_URL"], headers=headers, timeout=60) as recall,
    ):
        for i in range(edits):
            token = f"edit{uuid.uuid4().hex[:10]}"
            started = time.perf_counter()
            written = ingest.put(f"/v1/memory/files/{path}", json={"text": f"{body}\n- {token} {i}"})
            position = written.raise_for_status().json()["position"]
            while True:
                found = recall.post("/v1/memory/search", json={"query": token, "consistent_with": position}).json()
                if any(token in hit["snippet"] for hit in found["results"]):
                    break
            samples.append(time.perf_counter() - started)
    return [{"figure": "document edit → searchable", **_percentiles(samples), "edits": edits, "path": path}]
