"""Composition root of the ingest service."""

from fastapi import FastAPI

from cairn.ingest.api import router
from cairn.ingest.inbox import Inbox
from cairn.ingest.settings import IngestSettings
from cairn.ingest.store import TenantStore
from cairn.platform.pull import PullConsumer
from cairn.platform.runtime import Runtime, create_service_app, serve


def create_app(settings: IngestSettings) -> FastAPI:
    def wire(runtime: Runtime) -> list[PullConsumer]:
        runtime.extras["tenants"] = TenantStore(runtime.pool)
        return [Inbox(runtime.pool, runtime.publisher, settings.nats)]

    return create_service_app(
        "ingest",
        settings,
        routers=[router],
        wire=wire,
        description="The write door: messages, session commands, memory writes, admin.",
    )


def main() -> None:
    settings = IngestSettings()
    serve(create_app(settings), settings)
