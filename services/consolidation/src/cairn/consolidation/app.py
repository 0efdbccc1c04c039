"""Composition root of the consolidation service."""

from functools import partial

from fastapi import FastAPI
from redis.asyncio import Redis

from cairn.consolidation.extraction import OnCandidates
from cairn.consolidation.extraction_window import ExtractionWindow
from cairn.consolidation.extraction_worker import ExtractionWorker, TranscriptTurns
from cairn.consolidation.flush_worker import FlushWorker
from cairn.consolidation.handlers import bind, on_compaction_imminent, on_reset_boundary
from cairn.consolidation.records_handlers import (
    bind_writer,
    on_memory_write,
    on_record_requested,
    publish_as_requests,
)
from cairn.consolidation.settings import ConsolidationSettings, ExtractionSettings
from cairn.delivery.consumer import Handler, Projection
from cairn.delivery.pull import Consumer
from cairn.events import (
    INGEST_STREAM,
    SESSION_STREAM,
    CompactionImminent,
    MemoryWriteRequested,
    RecordRequested,
    ResetBoundary,
)
from cairn.events.streams import subject_pattern
from cairn.llm import Models
from cairn.memindex import LocalEmbedder, create_embedder
from cairn.platform.runtime import Runtime, create_service_app, serve

CONSUMER = "consolidation"
# Only memory writes and record requests of the (partitioned) ingest stream: a client waits for each one to be
# applied, so it must not queue behind a message import. (A consumer created before this filter keeps reading all.)
MEMORY_WRITES = ("cairn.*.*.memory.write-requested.*", "cairn.*.*.memory.record-requested.*")
# Only the session events it handles: transcript entries (nearly all of that stream) never reach it. They are read
# by a consumer of their own (extraction_worker.TranscriptTurns) that touches Redis only: it batches turns for model
# extraction and turns users' explicit "remember …" into record requests, which this projection applies.
SESSION_EVENTS = (subject_pattern("session.reset-boundary"), subject_pattern("session.compaction-imminent"))


def extraction_window(redis: "Redis", settings: ExtractionSettings) -> ExtractionWindow:
    return ExtractionWindow(
        redis,
        prefix=settings.key_prefix,
        debounce_s=settings.debounce_s,
        max_wait_s=settings.max_wait_s,
        max_batch_turns=settings.max_batch_turns,
        lease_s=settings.lease_s,
        keep_s=settings.keep_s,
        calls_per_hour=settings.calls_per_hour,
    )


def create_app(settings: ConsolidationSettings, on_candidates: OnCandidates | None = None) -> FastAPI:
    """`on_candidates`: where candidates extracted by model go; by default, as record requests into the ingest
    stream, which this service's record writer applies like any other."""

    def wire(runtime: Runtime) -> list[Consumer]:
        models = runtime.extras["models"] = Models(settings.llm, runtime.pool)  # for the memory writer
        embedder = create_embedder(settings.embedding)
        if isinstance(embedder, LocalEmbedder):
            embedder.load()  # once per process, before the first record needs it
        session_handlers: dict[type, Handler] = {
            ResetBoundary: bind(partial(on_reset_boundary, keep=settings.snapshot_messages)),
            CompactionImminent: bind(on_compaction_imminent),
        }
        ingest_handlers: dict[type, Handler] = {
            MemoryWriteRequested: bind_writer(on_memory_write, embedder, models),
            RecordRequested: bind_writer(on_record_requested, embedder, models),
        }
        flushes = FlushWorker(
            runtime.pool, models, runtime.publisher, poll_s=settings.flush_poll_s,
            retry_first_s=settings.flush_retry_first_s, no_model_recheck_s=settings.flush_no_model_recheck_s,
        )  # fmt: skip

        def projection(stream: str, handlers: dict[type, Handler], filter_subject: str | tuple[str, ...]) -> Projection:
            return Projection(
                CONSUMER, stream, handlers, runtime.pool, runtime.publisher, settings.nats, filter_subject
            )

        consumers: list[Consumer] = [
            projection(SESSION_STREAM, session_handlers, SESSION_EVENTS),
            projection(INGEST_STREAM, ingest_handlers, MEMORY_WRITES),
            flushes,
        ]
        extraction = settings.extraction
        window = runtime.extras["extraction_window"] = extraction_window(runtime.redis, extraction)
        consumers.append(
            TranscriptTurns(runtime.publisher.js, settings.nats, window, extraction, requests=runtime.publisher)
        )
        if extraction.enabled:
            handed = on_candidates or publish_as_requests(runtime.publisher)
            consumers.append(ExtractionWorker(window, models, extraction, handed))
        return consumers

    return create_service_app(
        "consolidation",
        settings,
        wire=wire,
        description="Memory documents and records: reset snapshots, memory writes, records (explicit and extracted) "
        "rendered into the bank, pre-compaction memory flushes.",
    )


def main() -> None:
    settings = ConsolidationSettings()
    serve(create_app(settings), settings)
