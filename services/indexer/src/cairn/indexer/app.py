"""Composition root of the indexer service."""

from fastapi import FastAPI

from cairn.events import SESSION_STREAM
from cairn.indexer.handlers import IndexerProjection
from cairn.indexer.settings import IndexerSettings
from cairn.platform.consumer import Projection
from cairn.platform.runtime import Runtime, create_service_app, serve


def create_app(settings: IndexerSettings) -> FastAPI:
    def wire(runtime: Runtime) -> list[Projection]:
        projection = IndexerProjection()
        return [Projection("indexer", SESSION_STREAM, projection, runtime.pool, runtime.publisher, settings.nats)]

    return create_service_app(
        "indexer",
        settings,
        wire=wire,
        description="Search projections of transcripts; health only over HTTP.",
    )


def main() -> None:
    settings = IndexerSettings()
    serve(create_app(settings), settings)
