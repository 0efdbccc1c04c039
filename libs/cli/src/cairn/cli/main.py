"""`cairn migrate`: apply every owner's schema folder and declare JetStream streams, once, before services start."""

import argparse
import asyncio
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from urllib.parse import urlsplit

import nats.errors
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from cairn.cli.bench import read_endpoints, report, report_rows, report_table, run_import, run_ingest, write_json
from cairn.cli.bench_agent_sizes import SIZES, run_sizes
from cairn.cli.bench_consumer import run_consumer_bench
from cairn.cli.bench_extraction import report_extraction, run_extraction
from cairn.cli.bench_fairness import FairnessPlan, run_fairness
from cairn.cli.bench_history import run_history
from cairn.cli.bench_lag import REQUEST_MESSAGES
from cairn.cli.bench_large_batch import run_large_batch
from cairn.cli.bench_load import LoadSettings, run_load, table
from cairn.cli.bench_memindex import run_embedding, run_lag, run_search
from cairn.cli.bench_memory import run_memory
from cairn.cli.bench_recall import main as run_recall_bench
from cairn.cli.bench_recall_calls import PARTS as RECALL_PARTS
from cairn.cli.bench_recall_calls import RecallBench
from cairn.cli.bench_recall_data import dataset_folders
from cairn.cli.bench_retrieval import MODES, report_retrieval, run_retrieval
from cairn.cli.bench_retrieval_notes import run_notes_retrieval
from cairn.cli.dead_letters import add_commands as add_dead_letter_commands
from cairn.cli.dead_letters import run as run_dead_letters
from cairn.cli.importer import import_file
from cairn.cli.memory import MemoryClient, export_memory, import_memory
from cairn.cli.reindex import reindex
from cairn.delivery.nats import RECONNECT_WAIT_S, StreamReplicasRefused, connect, ensure_streams
from cairn.delivery.settings import NatsSettings
from cairn.memindex import EmbeddingSettings, MemoryIndex, MemoryIndexSettings, create_embedder
from cairn.storage.migrations import SchemaError, apply_migrations
from cairn.storage.settings import PostgresSettings


class MigrateSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_", extra="ignore")

    postgres: PostgresSettings = PostgresSettings()
    nats: NatsSettings = NatsSettings()
    migrate_nats_wait_s: float = 30.0  # for a NATS server that is still starting, then give up


class ReindexSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_", extra="ignore")

    postgres: PostgresSettings = Field(default_factory=PostgresSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    memory: MemoryIndexSettings = Field(default_factory=MemoryIndexSettings)


async def run_reindex(tenant: str | None, documents_only: bool, trusted_only: bool) -> None:
    settings = ReindexSettings()
    if settings.postgres.admin_url is None:
        sys.exit("cairn reindex needs CAIRN_POSTGRES_ADMIN_URL (the owner's connection URL)")
    index = MemoryIndex(create_embedder(settings.embedding), settings.memory)
    rebuilt = await reindex(
        settings.postgres.admin_url.get_secret_value(), index, tenant, documents_only=documents_only,
        trusted_only=trusted_only,
    )  # fmt: skip
    print(f"memory index rebuilt: {rebuilt.tenants} tenants, {rebuilt.documents} documents, "
          f"{rebuilt.sessions} sessions, {rebuilt.chunks} chunks in {rebuilt.seconds}s")  # fmt: skip


async def migrate() -> None:
    settings = MigrateSettings()
    admin_url: SecretStr | None = settings.postgres.admin_url
    if admin_url is None:
        sys.exit("cairn migrate needs CAIRN_POSTGRES_ADMIN_URL (the owner's connection URL)")
    password = settings.postgres.app_password
    try:
        applied = await apply_migrations(
            admin_url.get_secret_value(), password.get_secret_value() if password else None
        )
    except SchemaError as error:
        sys.exit(f"cairn migrate: {error}")
    print(f"migrations applied: {', '.join(applied) or 'none (up to date)'}")
    attempts = max(1, round(settings.migrate_nats_wait_s / RECONNECT_WAIT_S))
    try:
        nc = await connect(settings.nats.url, "cairn-migrate", attempts)
    except (OSError, nats.errors.Error) as error:
        where = urlsplit(settings.nats.url).netloc.rpartition("@")[2]  # never print credentials
        sys.exit(f"cairn migrate could not reach NATS at {where} to declare the streams; "
                 f"set CAIRN_NATS_URL ({type(error).__name__})")  # fmt: skip
    replicas = settings.nats.stream_replicas
    try:
        streams = await ensure_streams(nc.jetstream(), replicas)
    except StreamReplicasRefused as refused:
        sys.exit(f"cairn migrate: {refused}")
    finally:
        await nc.close()
    names = ", ".join(stream.name for stream in streams)
    print(f"streams declared ({replicas} {'replica' if replicas == 1 else 'replicas'} each): {names}")
    for stream in streams:
        if stream.replicas_before not in (None, replicas):  # a lowered count is said too: it may be a mistake
            print(f"  {stream.name}: replicas {stream.replicas_before} -> {replicas}")


def run_memindex_bench(args: argparse.Namespace) -> None:
    rows: list[dict[str, object]] = []
    if args.part in ("embedding", "all"):
        rows += [{"part": "embedding", **row} for row in run_embedding()]
    endpoints = read_endpoints(args.endpoints) if args.part != "embedding" else {}
    if args.part in ("lag", "all"):
        rows += [{"part": "lag", **row} for row in run_lag(endpoints, args.edits, args.lag_path)]
    if args.part in ("search", "all"):
        rows += [
            {"part": "search", **row}
            for row in run_search(endpoints, args.chunks, args.queries, args.data, args.keep_seed)
        ]
    if args.part == "sizes":
        rows += [{"part": "sizes", **row} for row in run_sizes(endpoints, args.sizes, args.queries, args.data)]
    for row in rows:
        print("  ".join(f"{k}={v}" for k, v in row.items()))
    write_json(args.out, {"benchmark": "memindex", "rows": rows})


def retrieval_bench(args: argparse.Namespace) -> None:
    endpoints = read_endpoints(args.endpoints)
    if args.mode == "notes":
        scored = run_notes_retrieval(endpoints, args.data, args.out, args.questions, args.index_timeout)
    else:
        scored = run_retrieval(endpoints, args.data, args.out, args.mode, args.index_timeout)
    report_retrieval(scored, Path(f"bench-results/retrieval-{args.data.name}-{args.mode}.json"))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cairn")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("migrate", help="apply every owner's schema (schema/*.sql) and declare JetStream streams")
    rebuild = commands.add_parser("reindex", help="rebuild the memory index from documents and remembered turns")
    rebuild.add_argument("--tenant", help="only this tenant (default: every tenant)")
    only = rebuild.add_mutually_exclusive_group()
    only.add_argument(
        "--documents",
        action="store_true",
        help="only re-chunk every memory document (entry by entry), in place; transcripts untouched",
    )
    only.add_argument("--trusted", action="store_true",
                      help="only re-chunk MEMORY.md and memory/bank/* (entry by entry), in place")  # fmt: skip
    imports = commands.add_parser("import", help="import a JSONL file of messages (or a dataset corpus.jsonl)")
    imports.add_argument("file", type=Path)
    imports.add_argument("--endpoints", type=Path, default=Path(".cairn/endpoints.env"))
    imports.add_argument("--api-key", help="the tenant's key (default: CAIRN_API_KEY from --endpoints)")
    memory = commands.add_parser("memory", help="an agent's memory documents as a folder of Markdown files")
    directions = memory.add_subparsers(dest="direction", required=True)
    export = directions.add_parser("export", help="write the documents under DIR (and a manifest of versions)")
    imported_memory = directions.add_parser("import", help="send back what was edited under DIR since the export")
    imported_memory.add_argument("--delete", action="store_true", help="delete documents whose files were deleted")
    for direction in (export, imported_memory):
        direction.add_argument("dir", type=Path)
        direction.add_argument("--agent", default="main")
        direction.add_argument("--endpoints", type=Path, default=Path(".cairn/endpoints.env"))
        direction.add_argument("--api-key", help="the tenant's key (default: CAIRN_API_KEY from --endpoints)")
    add_dead_letter_commands(commands)
    bench = commands.add_parser("bench", help="benchmarks against a running stack (`make up`)")
    kinds = bench.add_subparsers(dest="kind", required=True)
    ingest = kinds.add_parser("ingest", help="end-to-end ingest throughput (accepted → searchable)")
    ingest.add_argument("--messages", type=int, default=5000)
    ingest.add_argument("--batch-size", type=int, default=100)
    imported = kinds.add_parser("import", help="`cairn import` of a dataset corpus into a fresh tenant")
    imported.add_argument("--data", type=Path, default=Path("../shared/datasets/locomo"))
    history = kinds.add_parser("history", help="p50/p99 of session history on a large session")
    history.add_argument("--messages", type=int, default=10_000)
    memory_bench = kinds.add_parser("memory", help="p50/p99 of memory-document writes (applied) and reads")
    memory_bench.add_argument("--runs", type=int, default=200)
    retrieval = kinds.add_parser("retrieval", help="ingest a retrieval dataset, ask its questions, write a scorer run")
    retrieval.add_argument("--data", type=Path, required=True, help="a dataset folder (corpus.jsonl, questions.jsonl)")
    retrieval.add_argument("--out", type=Path, required=True, help="the run file (JSONL) for evaluate.py")
    retrieval.add_argument(
        "--mode",
        choices=(*MODES, "notes"),
        default="sessions",
        help="notes: each sitting written as a memory note, found by memory search (documents)",
    )
    retrieval.add_argument("--questions", type=Path, help="--mode notes: ask this file's questions instead")
    retrieval.add_argument(
        "--index-timeout", type=float, default=600.0,
        help="seconds to wait for each conversation to be indexed (a slow embedding model needs more)",
    )  # fmt: skip
    retrieval.add_argument("--endpoints", type=Path, default=Path(".cairn/endpoints.env"))
    load = kinds.add_parser(
        "load", help="multi-tenant traffic: throughput vs a raw baseline, index lag, search latency"
    )
    load.add_argument("--tenants", type=int, default=1000)
    load.add_argument("--messages", type=int, default=100_000, help="posted through the API by this run at most")
    load.add_argument("--throughput-messages", type=int, default=20_000)
    load.add_argument("--lag-seconds", type=float, default=30.0)
    load.add_argument("--search-at", default="100000,1000000", help="index sizes at which to time searches")
    load.add_argument("--concurrency", type=int, default=4)
    load.add_argument("--copy-rows", action="store_true", help="past --messages, grow the index by copying its rows")
    load.add_argument("--lag-workers", type=int, default=2, help="processes posting the index-lag phase's load")
    load.add_argument(
        "--lag-batch",
        type=int,
        default=REQUEST_MESSAGES,
        help="messages per lag-phase request (default: the throughput phase's 20; 5 = a live chat's trickle)",
    )
    load.add_argument("--queries", type=int, default=1000, help="searches timed per tenant and index size")
    load.add_argument("--skip-search", action="store_true", help="run only throughput and index lag")
    load.add_argument("--throughput-only", action="store_true", help="stop after the throughput phase")
    memindex = kinds.add_parser("memindex", help="memory index: embedding texts/s, search p50/p99, edit indexing lag")
    memindex.add_argument("--part", choices=("embedding", "search", "lag", "sizes", "all"), default="all")
    memindex.add_argument(
        "--sizes", type=lambda v: tuple(int(s) for s in v.split(",")), default=SIZES,
        help="sizes: agents of these chunk counts (comma-separated), exact scan vs HNSW, and their searches",
    )  # fmt: skip
    memindex.add_argument("--chunks", type=int, default=100_000)
    memindex.add_argument("--queries", type=int, default=200)
    memindex.add_argument("--edits", type=int, default=40)
    memindex.add_argument("--lag-path", default="memory/bank/lag.md", help="lag: the document edited")
    memindex.add_argument("--data", type=Path, help="search: realistic text from this dataset's turns and questions")
    memindex.add_argument("--keep-seed", type=Path, help="search: reuse agents seeded by an earlier run (key file)")
    large = kinds.add_parser("large-batch", help="a 1,000 × 10 KB batch: time until all of it is found word for word")
    large.add_argument("--messages", type=int, default=1000)
    large.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the batch to be searchable")
    consumer = kinds.add_parser("consumer", help="per-message cost of nats-py, cairn's pull loop and FastStream")
    consumer.add_argument("--messages", type=int, default=20_000)
    consumer.add_argument("--rounds", type=int, default=5)
    extraction = kinds.add_parser(
        "extraction", help="model calls, tokens per 100 turns and throughput of extraction on a LoCoMo conversation"
    )
    extraction.add_argument("--data", type=Path, default=Path("../shared/datasets/locomo"))
    extraction.add_argument("--conversation", default="conv-26")
    extraction.add_argument("--turns", type=int, help="only the first this many turns (default: all)")
    extraction.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for every turn to be read")
    recall = kinds.add_parser(
        "recall", help="POST /v1/recall: lane-1 p50/p99 by size, under load with lane 2 hanging, dataset questions"
    )
    recall.add_argument("--part", choices=(*RECALL_PARTS, "all"), default="all")
    recall.add_argument("--sizes", default="10000,100000", help="trusted entries per timed agent (+ 20)")
    recall.add_argument("--queries", type=int, default=300, help="recalls timed per size, one caller")
    recall.add_argument("--concurrency", type=int, default=50, help="lane-1 callers at once in the load part")
    recall.add_argument("--load-queries", type=int, default=600, help="lane-1 recalls per load phase")
    recall.add_argument("--lane2-callers", type=int, default=20, help="callers keeping lane 2 on the hanging model")
    recall.add_argument("--lane2-timeout-ms", type=int, default=2000, help="their agents' active_memory.timeout_ms")
    recall.add_argument("--data", type=Path, default=Path("../shared/datasets"), help="the shared datasets folder")
    recall.add_argument("--datasets", default="locomo,memorybank-cn,memorybank-en")
    recall.add_argument("--questions", type=int, help="questions asked per dataset (default: all)")
    recall.add_argument("--keep-seed", type=Path, help="reuse agents seeded by an earlier run (key file)")
    fairness = kinds.add_parser(
        "fairness", help="a quiet tenant's index lag while a noisy one writes at full speed, unlimited then limited"
    )
    fairness.add_argument("--seconds", type=float, default=30.0)
    fairness.add_argument("--quiet-per-s", type=float, default=5.0, help="the quiet tenant's messages/s")
    fairness.add_argument("--connections", type=int, default=8, help="the noisy tenant's requests at once")
    fairness.add_argument("--batch", type=int, default=100, help="messages per noisy request")
    fairness.add_argument("--noisy-limit", type=float, default=10.0, help="limited phase: noisy write requests/s")
    for kind in (
        ingest,
        imported,
        history,
        load,
        memory_bench,
        memindex,
        consumer,
        large,
        recall,
        extraction,
        fairness,
    ):
        kind.add_argument("--endpoints", type=Path, default=Path(".cairn/endpoints.env"))
        kind.add_argument("--out", type=Path, default=Path(f"bench-results/{kind.prog.split()[-1]}.json"))
    return parser


def memory(args: argparse.Namespace) -> None:
    endpoints = read_endpoints(args.endpoints)
    client = MemoryClient(endpoints["CAIRN_INGEST_URL"], endpoints["CAIRN_RECALL_URL"],
                          args.api_key or endpoints["CAIRN_API_KEY"], args.agent)  # fmt: skip
    try:
        if args.direction == "export":
            report = export_memory(client, args.dir)
        else:
            report = import_memory(client, args.dir, delete=args.delete)
    finally:
        client.close()
    for problem in report.problems:
        print(problem, file=sys.stderr)
    print(f"memory {args.direction} {args.dir} (agent {args.agent}): {report.summary()}")
    if not report.ok:
        sys.exit(1)


def load_settings(args: argparse.Namespace) -> LoadSettings:
    """`bench load`'s flags as its settings; `--skip-search` leaves no index size to search at."""
    return LoadSettings(
        tenants=args.tenants, messages=args.messages, throughput_messages=args.throughput_messages,
        lag_seconds=args.lag_seconds, lag_workers=args.lag_workers, lag_batch=args.lag_batch,
        concurrency=args.concurrency,
        search_at=() if args.skip_search else tuple(int(n) for n in args.search_at.split(",")),
        copy_rows=args.copy_rows, throughput_only=args.throughput_only, queries=args.queries,
    )  # fmt: skip


def recall_settings(args: argparse.Namespace) -> RecallBench:
    """`bench recall`'s flags as its settings; the datasets are looked for only when their part runs."""
    parts = RECALL_PARTS if args.part == "all" else (args.part,)
    data = dataset_folders(args.datasets, args.data) if {"datasets", "calibrate"} & set(parts) else ()
    return RecallBench(
        parts=parts, sizes=tuple(int(n) for n in args.sizes.split(",") if n), queries=args.queries,
        concurrency=args.concurrency, load_queries=args.load_queries, lane2_callers=args.lane2_callers,
        lane2_timeout_ms=args.lane2_timeout_ms, data=data, questions=args.questions, keep_seed=args.keep_seed,
    )  # fmt: skip


def main() -> None:
    args = _parser().parse_args()
    if args.command == "bench":
        BENCHES.get(args.kind, _bench)(args)
    else:
        _command(args)


def _command(args: argparse.Namespace) -> None:
    if args.command == "migrate":
        asyncio.run(migrate())
    elif args.command == "memory":
        memory(args)
    elif args.command == "reindex":
        asyncio.run(run_reindex(args.tenant, args.documents, args.trusted))
    elif args.command == "dead-letters":
        sys.exit(asyncio.run(run_dead_letters(args)))
    elif args.command == "import":
        endpoints = read_endpoints(args.endpoints)
        result = import_file(args.file, endpoints["CAIRN_INGEST_URL"], endpoints["CAIRN_RECALL_URL"],
                             args.api_key or endpoints["CAIRN_API_KEY"])  # fmt: skip
        print(f"imported {result.messages} messages ({result.rejected} rejected): {result.accepted_per_s}/s "
              f"accepted, {result.searchable_per_s}/s until searchable")  # fmt: skip


def _bench_extraction(args: argparse.Namespace) -> None:
    corpus = args.data / "corpus.jsonl"
    result = run_extraction(read_endpoints(args.endpoints), corpus, args.conversation, args.turns, args.timeout)
    report_extraction(result, args.out)


# Benches that have a function of their own (`_bench` holds the older ones).
BENCHES: dict[str, Callable[[argparse.Namespace], None]] = {"extraction": _bench_extraction}


def _bench(args: argparse.Namespace) -> None:
    if args.kind == "ingest":
        report("ingest", run_ingest(read_endpoints(args.endpoints), args.messages, args.batch_size), args.out)
    elif args.kind == "import":
        report("import", run_import(read_endpoints(args.endpoints), args.data / "corpus.jsonl"), args.out)
    elif args.kind == "memindex":
        run_memindex_bench(args)
    elif args.kind == "retrieval":
        retrieval_bench(args)
    elif args.kind == "load":
        loaded = asyncio.run(run_load(read_endpoints(args.endpoints), load_settings(args)))
        report_table("load", table(loaded), loaded, args.out)
    elif args.kind == "large-batch":
        report("large-batch", run_large_batch(read_endpoints(args.endpoints), args.messages, args.timeout), args.out)
    elif args.kind == "consumer":
        nats_url = read_endpoints(args.endpoints)["CAIRN_NATS_URL"]
        figures = asyncio.run(run_consumer_bench(nats_url, args.messages, args.rounds))
        report_rows("consumer", [asdict(f) for f in figures], args.out)
    elif args.kind == "recall":
        run_recall_bench(args.endpoints, recall_settings(args), args.out)
    else:
        _rows_bench(args)


def _rows_bench(args: argparse.Namespace) -> None:
    """The benches that report a list of rows."""
    if args.kind == "fairness":
        plan = FairnessPlan(args.seconds, args.quiet_per_s, args.connections, args.batch, args.noisy_limit)
        report_rows("fairness", run_fairness(read_endpoints(args.endpoints), plan), args.out)
    elif args.kind == "memory":
        report_rows("memory", run_memory(read_endpoints(args.endpoints), args.runs), args.out)
    else:
        report_rows("history", run_history(read_endpoints(args.endpoints), args.messages), args.out)
