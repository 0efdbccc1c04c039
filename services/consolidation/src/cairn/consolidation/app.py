"""Composition root of the consolidation service."""

from functools import partial

from fastapi import FastAPI
from redis.asyncio import Redis

from cairn.consolidation.extraction import OnCandidates
from cairn.consolidation.extraction_window import ExtractionWindow
from cairn.consolidation.extraction_worker import ExtractionWorker, TranscriptTurns, log_candidates
from cairn.consolidation.flush_worker import FlushWorker
from cairn.consolidation.handlers import (
    bind,
    bind_at,
    on_compaction_imminent,
    on_memory_write_requested,
    on_reset_boundary,
)
from cairn.consolidation.settings import ConsolidationSettings, ExtractionSettings
from cairn.delivery.consumer import Handler, Projection
from cairn.delivery.pull import Consumer
from cairn.events import INGEST_STREAM, SESSION_STREAM, CompactionImminent, MemoryWriteRequested, ResetBoundary
from cairn.events.streams import subject_pattern
from cairn.llm import Models
from cairn.platform.runtime import Runtime, create_service_app, serve

CONSUMER = "consolidation"
# Only memory writes of the (partitioned) ingest stream: a client waits for each one to be applied, so it
# must not queue behind a message import. (A consumer created before this filter keeps reading all.)
MEMORY_WRITES = "cairn.*.*.memory.write-requested.*"
# Only the session events it handles: transcript entries (nearly all of that stream) never reach it; extraction
# reads them through a consumer of its own (extraction_worker.TranscriptTurns) that touches Redis only.
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


def create_app(settings: ConsolidationSettings, on_candidates: OnCandidates = log_candidates) -> FastAPI:
    """`on_candidates`: where extracted fact candidates go (the record store, once wired)."""
    session_handlers: dict[type, Handler] = {
        ResetBoundary: bind(partial(on_reset_boundary, keep=settings.snapshot_messages)),
        CompactionImminent: bind(on_compaction_imminent),
    }
    ingest_handlers: dict[type, Handler] = {MemoryWriteRequested: bind_at(on_memory_write_requested)}

    def wire(runtime: Runtime) -> list[Consumer]:
        models = runtime.extras["models"] = Models(settings.llm, runtime.pool)  # for the memory writer
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
        if extraction.enabled:
            window = runtime.extras["extraction_window"] = extraction_window(runtime.redis, extraction)
            consumers.append(TranscriptTurns(runtime.publisher.js, settings.nats, window, extraction))
            consumers.append(ExtractionWorker(window, models, extraction, on_candidates))
        return consumers

    return create_service_app(
        "consolidation",
        settings,
        wire=wire,
        description="Memory documents: reset snapshots, memory writes, pre-compaction memory flushes; fact candidates "
        "extracted after turns.",
    )


def main() -> None:
    settings = ConsolidationSettings()
    serve(create_app(settings), settings)
