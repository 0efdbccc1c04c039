"""Composition root of the session service."""

from fastapi import FastAPI

from cairn.events import INGEST_STREAM
from cairn.platform.consumer import Projection
from cairn.platform.runtime import Runtime, create_service_app, serve
from cairn.session.handlers import build_handlers
from cairn.session.settings import SessionSettings


def create_app(settings: SessionSettings) -> FastAPI:
    def wire(runtime: Runtime) -> list[Projection]:
        handlers = build_handlers(settings)
        return [Projection("session", INGEST_STREAM, handlers, runtime.pool, runtime.publisher, settings.nats)]

    return create_service_app(
        "session", settings, wire=wire, description="Owns sessions and transcripts; health only over HTTP."
    )


def main() -> None:
    settings = SessionSettings()
    serve(create_app(settings), settings)
