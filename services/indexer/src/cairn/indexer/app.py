"""Composition root of the indexer service."""

from collections.abc import Mapping

from fastapi import FastAPI

from cairn.events import INGEST_STREAM, MEMORY_STREAM, SESSION_STREAM
from cairn.indexer.handlers import IndexerProjection
from cairn.indexer.memory_handlers import CONSUMER, MemoryTranscripts, build_memory_handlers
from cairn.indexer.memory_worker import MemoryWorker
from cairn.indexer.settings import IndexerSettings
from cairn.memindex import LocalEmbedder, MemoryIndex, create_embedder
from cairn.platform.consumer import BatchHandlers, Handler, Projection, SharedDecoding
from cairn.platform.pull import Consumer
from cairn.platform.runtime import Runtime, create_service_app, serve

AGENT_CONFIGURED = "cairn.*.*.agent.configured.*"  # the ingest stream's subjects carry a partition token


def create_app(settings: IndexerSettings) -> FastAPI:
    def wire(runtime: Runtime) -> list[Consumer]:
        embedder = create_embedder(settings.embedding)
        if isinstance(embedder, LocalEmbedder):
            embedder.load()  # once per process, before the first event needs it
        index = MemoryIndex(embedder, settings.memory)
        runtime.extras["memory_index"] = index
        memory = build_memory_handlers(index)

        def projection(
            name: str, stream: str, handlers: Mapping[type, Handler] | BatchHandlers, only: str | None = None
        ) -> Projection:
            return Projection(name, stream, handlers, runtime.pool, runtime.publisher, settings.nats, only)

        # both projections of the session stream read every transcript event: each is decoded once
        transcripts = SharedDecoding()

        def of_transcripts(name: str, handlers: BatchHandlers) -> Projection:
            return Projection(name, SESSION_STREAM, handlers, runtime.pool, runtime.publisher, settings.nats,
                              decode=transcripts)  # fmt: skip

        return [
            of_transcripts("indexer", IndexerProjection()),
            # every transcript event of every tenant: a fetched batch in one transaction (migration 0025)
            of_transcripts(CONSUMER, MemoryTranscripts(index)),
            projection(CONSUMER, MEMORY_STREAM, memory),
            projection(CONSUMER, INGEST_STREAM, memory, AGENT_CONFIGURED),
            MemoryWorker(runtime.pool, index),
        ]

    return create_service_app(
        "indexer",
        settings,
        wire=wire,
        description="Search projections of transcripts and the memory index; health only over HTTP.",
        projector=True,
    )


def main() -> None:
    settings = IndexerSettings()
    serve(create_app(settings), settings)
