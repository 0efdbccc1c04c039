"""Composition root of the indexer service."""

from collections.abc import Mapping

from fastapi import FastAPI

from cairn.delivery.consumer import BatchHandlers, Handler, Part, Projection
from cairn.delivery.pull import Consumer
from cairn.events import INDEXER_CONSUMER, INGEST_STREAM, MEMORY_STREAM, SESSION_STREAM
from cairn.indexer.handlers import IndexerProjection
from cairn.indexer.memory_handlers import CONSUMER, MemoryTranscripts, build_memory_handlers
from cairn.indexer.memory_worker import MemoryWorker
from cairn.indexer.settings import IndexerSettings
from cairn.memindex import LocalEmbedder, MemoryIndex, create_embedder
from cairn.platform.runtime import Runtime, create_service_app, serve

AGENT_CONFIGURED = "cairn.*.*.agent.configured.*"  # the ingest stream's subjects carry a partition token
SEARCH = "indexer"  # the full-text projection's name: its processed records (and its consumer's, before the merge)


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

        # both projections of the session stream read every transcript event: one fetch, decode, transaction and
        # ack feeds both; each records what it applied under its own name, so the hand-over from their two old
        # consumers (at different positions) re-reads from the older one's and each skips what it applied
        parts = [Part(SEARCH, IndexerProjection()), Part(CONSUMER, MemoryTranscripts(index))]
        transcripts = Projection.merged(INDEXER_CONSUMER, SESSION_STREAM, parts, runtime.pool, runtime.publisher,
                                        settings.nats, replaces=[part.name for part in parts])  # fmt: skip
        return [
            transcripts,
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
