"""Composition root of the recall service."""

from fastapi import FastAPI

from cairn.platform.consumer import Projection
from cairn.platform.incognito import IncognitoThreads
from cairn.platform.runtime import Runtime, create_service_app, serve
from cairn.recall.api import router
from cairn.recall.files_api import router as files_router
from cairn.recall.files_queries import DocumentStore
from cairn.recall.history_queries import HistoryStore
from cairn.recall.queries import ReadStore
from cairn.recall.sessions_api import router as sessions_router
from cairn.recall.settings import RecallSettings


def create_app(settings: RecallSettings) -> FastAPI:
    def wire(runtime: Runtime) -> list[Projection]:
        runtime.extras["reads"] = ReadStore(runtime.pool)
        runtime.extras["history"] = HistoryStore(runtime.pool)
        runtime.extras["documents"] = DocumentStore(runtime.pool)
        runtime.extras["incognito"] = IncognitoThreads(runtime.redis, settings.incognito)
        return []

    return create_service_app(
        "recall",
        settings,
        routers=[router, sessions_router, files_router],
        wire=wire,
        description="The read door: session search, history, memory files, recall.",
    )


def main() -> None:
    settings = RecallSettings()
    serve(create_app(settings), settings)
