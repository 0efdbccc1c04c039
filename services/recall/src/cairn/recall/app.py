"""Composition root of the recall service."""

from fastapi import FastAPI

from cairn.delivery.pull import Consumer
from cairn.llm import Models
from cairn.memindex import LocalEmbedder, create_embedder
from cairn.platform.runtime import Runtime, create_service_app, serve
from cairn.recall.api import router
from cairn.recall.files_api import router as files_router
from cairn.recall.files_queries import DocumentStore
from cairn.recall.history_queries import HistoryStore
from cairn.recall.memory_api import router as memory_router
from cairn.recall.memory_queries import MemoryReads
from cairn.recall.memory_ranking import RankingOptions
from cairn.recall.memory_search import MemorySearch
from cairn.recall.progress import IndexProgress
from cairn.recall.queries import ReadStore
from cairn.recall.sessions_api import router as sessions_router
from cairn.recall.settings import RecallSettings
from cairn.recall.usage_api import router as usage_router


def create_app(settings: RecallSettings) -> FastAPI:
    def wire(runtime: Runtime) -> list[Consumer]:
        progress = IndexProgress(settings.postgres.url.get_secret_value())
        runtime.extras["reads"] = ReadStore(runtime.pool, progress)
        runtime.extras["history"] = HistoryStore(runtime.pool)
        runtime.extras["documents"] = DocumentStore(runtime.pool)
        runtime.extras["models"] = Models(settings.llm, runtime.pool)
        embedder = create_embedder(settings.embedding)
        if isinstance(embedder, LocalEmbedder):
            embedder.load()  # once per process, so the first search does not pay for it
        ranking = settings.memory_search
        options = RankingOptions(ranking.fusion, ranking.vector_weight, ranking.half_life_days, ranking.mmr_lambda)
        runtime.extras["embedder"] = embedder
        runtime.extras["memory_reads"] = MemoryReads(runtime.pool, progress=progress)
        runtime.extras["memory_search"] = MemorySearch(runtime.extras["memory_reads"], embedder, options)
        return [progress]

    return create_service_app(
        "recall",
        settings,
        routers=[router, sessions_router, files_router, memory_router, usage_router],
        wire=wire,
        description="The read door: session search, history, memory files and memory search, recall.",
    )


def main() -> None:
    settings = RecallSettings()
    serve(create_app(settings), settings)
