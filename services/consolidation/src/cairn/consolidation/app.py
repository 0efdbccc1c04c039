"""Composition root of the consolidation service."""

from functools import partial

from fastapi import FastAPI

from cairn.consolidation.handlers import bind, on_compaction_imminent, on_reset_boundary
from cairn.consolidation.records_handlers import (
    bind_writer,
    on_memory_write,
    on_record_requested,
    on_transcript_appended,
)
from cairn.consolidation.settings import ConsolidationSettings
from cairn.delivery.consumer import Handler, Projection
from cairn.events import (
    INGEST_STREAM,
    SESSION_STREAM,
    CompactionImminent,
    MemoryWriteRequested,
    RecordRequested,
    ResetBoundary,
    TranscriptAppended,
)
from cairn.events.streams import subject_pattern
from cairn.llm import Models
from cairn.memindex import LocalEmbedder, create_embedder
from cairn.platform.runtime import Runtime, create_service_app, serve

CONSUMER = "consolidation"
# Only memory writes and record requests of the (partitioned) ingest stream: a client waits for each one to be
# applied, so it must not queue behind a message import. (A consumer created before this filter keeps reading all.)
MEMORY_WRITES = ("cairn.*.*.memory.write-requested.*", "cairn.*.*.memory.record-requested.*")
# The session events it handles. Transcript entries are nearly all of that stream: they come for the explicit
# "remember …" rules, one regex pass per entry (incognito sessions never reach the stream).
SESSION_EVENTS = (
    subject_pattern("session.reset-boundary"),
    subject_pattern("session.compaction-imminent"),
    subject_pattern("transcript.appended"),
)


def create_app(settings: ConsolidationSettings) -> FastAPI:
    def wire(runtime: Runtime) -> list[Projection]:
        models = Models(settings.llm, runtime.pool)
        runtime.extras["models"] = models  # for the memory writer
        embedder = create_embedder(settings.embedding)
        if isinstance(embedder, LocalEmbedder):
            embedder.load()  # once per process, before the first record needs it
        session_handlers: dict[type, Handler] = {
            ResetBoundary: bind(partial(on_reset_boundary, keep=settings.snapshot_messages)),
            CompactionImminent: bind(on_compaction_imminent),
            TranscriptAppended: bind_writer(on_transcript_appended, embedder, models),
        }
        ingest_handlers: dict[type, Handler] = {
            MemoryWriteRequested: bind_writer(on_memory_write, embedder, models),
            RecordRequested: bind_writer(on_record_requested, embedder, models),
        }

        def projection(stream: str, handlers: dict[type, Handler], filter_subject: str | tuple[str, ...]) -> Projection:
            return Projection(
                CONSUMER, stream, handlers, runtime.pool, runtime.publisher, settings.nats, filter_subject
            )

        return [
            projection(SESSION_STREAM, session_handlers, SESSION_EVENTS),
            projection(INGEST_STREAM, ingest_handlers, MEMORY_WRITES),
        ]

    return create_service_app(
        "consolidation",
        settings,
        wire=wire,
        description="Memory documents and records: reset snapshots, memory writes, explicit records rendered into the "
        "bank, due pre-compaction flushes.",
    )


def main() -> None:
    settings = ConsolidationSettings()
    serve(create_app(settings), settings)
