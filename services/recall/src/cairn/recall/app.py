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
from cairn.recall.recall_api import router as recall_router
from cairn.recall.recall_bounds import Breaker, ResultCache
from cairn.recall.recall_reads import KnownConfigs, RecallReads
from cairn.recall.recall_run import Recaller
from cairn.recall.recall_traces import TraceStore, TraceSweep
from cairn.recall.recall_traces_api import router as traces_router
from cairn.recall.records_api import router as records_router
from cairn.recall.records_queries import RecordStore
from cairn.recall.sessions_api import router as sessions_router
from cairn.recall.settings import RecallSettings
from cairn.recall.usage_api import router as usage_router
from cairn.recall.visibility import Ceilings


def create_app(settings: RecallSettings) -> FastAPI:
    def wire(runtime: Runtime) -> list[Consumer]:
        progress = IndexProgress(settings.postgres.url.get_secret_value())
        runtime.extras["reads"] = ReadStore(runtime.pool, progress)
        runtime.extras["history"] = HistoryStore(runtime.pool)
        runtime.extras["ceilings"] = Ceilings(runtime.pool, settings.agent_config_fresh_s)
        runtime.extras["documents"] = DocumentStore(runtime.pool)
        runtime.extras["records"] = RecordStore(runtime.pool)
        runtime.extras["models"] = Models(settings.llm, runtime.pool)
        embedder = create_embedder(settings.embedding)
        if isinstance(embedder, LocalEmbedder):
            embedder.load()  # once per process, so the first search does not pay for it
        ranking = settings.memory_search
        options = RankingOptions(ranking.fusion, ranking.vector_weight, ranking.half_life_days, ranking.mmr_lambda)
        runtime.extras["embedder"] = embedder
        runtime.extras["memory_reads"] = MemoryReads(runtime.pool, progress=progress)
        runtime.extras["memory_search"] = MemorySearch(runtime.extras["memory_reads"], embedder, options)
        trace = settings.trace
        traces = TraceStore(runtime.pool, runtime.publisher, save_wait_s=trace.save_wait_s,
                            store_within_s=trace.store_within_s)  # fmt: skip
        runtime.extras["traces"] = traces
        runtime.extras["breaker"] = Breaker(runtime.redis)
        runtime.extras["recall_cache"] = ResultCache(runtime.redis)
        runtime.extras["recaller"] = Recaller(
            reads=RecallReads(runtime.pool, KnownConfigs(settings.agent_config_fresh_s)),
            memory_search=runtime.extras["memory_search"],
            memory_reads=runtime.extras["memory_reads"],
            sessions=runtime.extras["reads"],
            documents=runtime.extras["documents"],
            history=runtime.extras["history"],
            models=runtime.extras["models"],
            breaker=runtime.extras["breaker"],
            cache=runtime.extras["recall_cache"],
            traces=traces,
            consistency_wait_s=settings.consistency_wait_s,
        )
        return [progress, TraceSweep(traces, trace.retention_days, trace.sweep_every_s)]

    return create_service_app(
        "recall",
        settings,
        routers=[
            router,
            sessions_router,
            files_router,
            memory_router,
            recall_router,
            traces_router,
            usage_router,
            records_router,
        ],
        wire=wire,
        description="The read door: session search, history, memory files and memory search, recall.",
    )


def main() -> None:
    settings = RecallSettings()
    serve(create_app(settings), settings)
