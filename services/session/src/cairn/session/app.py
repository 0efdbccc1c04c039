"""Composition root of the session service."""

from datetime import timedelta

from fastapi import FastAPI

from cairn.delivery.consumer import Projection
from cairn.delivery.leases import PartitionLeases
from cairn.delivery.partitioned import PartitionedConsumers
from cairn.delivery.pull import Consumer
from cairn.delivery.supervision import Restarts
from cairn.events import INGEST_STREAM
from cairn.events.streams import INGEST_PARTITIONS, partition_filter
from cairn.platform.runtime import Runtime, create_service_app, serve
from cairn.session.lifecycle import LifecycleSweeper
from cairn.session.projection import SessionProjection
from cairn.session.settings import SessionSettings


def create_app(settings: SessionSettings) -> FastAPI:
    handlers = SessionProjection(settings)

    def wire(runtime: Runtime) -> list[Consumer]:
        def partition(number: int) -> Projection:
            return Projection(f"session-p{number}", INGEST_STREAM, handlers, runtime.pool, runtime.publisher,
                              settings.nats, filter_subject=partition_filter(number))  # fmt: skip

        # One writer per (tenant, agent) partition across replicas keeps every session's order.
        leases = PartitionLeases(runtime.redis, "session", INGEST_PARTITIONS, settings.partition_lease_s)
        sweeper = LifecycleSweeper(
            runtime.pool, timedelta(days=settings.dormant_after_days), timedelta(days=settings.archive_after_days),
            settings.lifecycle_sweep_s,
        )  # fmt: skip
        restarts = Restarts.of(settings.supervision)
        return [PartitionedConsumers(leases, INGEST_STREAM, partition, restarts=restarts), sweeper]

    return create_service_app(
        "session",
        settings,
        wire=wire,
        description="Owns sessions and transcripts; health only over HTTP.",
        projector=True,
    )


def main() -> None:
    settings = SessionSettings()
    serve(create_app(settings), settings)
