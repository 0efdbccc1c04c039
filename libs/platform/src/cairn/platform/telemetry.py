"""OpenTelemetry and logging. The exporter is chosen by the standard OTEL_* variables and is off by
default; context always propagates (FastStream middleware puts it in NATS headers), so a trace spans
every service whenever an exporter is on."""

import json
import logging
import os
import sys
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from cairn.platform.settings import TelemetrySettings


def _exporter() -> SpanExporter | None:
    choice = os.environ.get("OTEL_TRACES_EXPORTER", "none").strip().lower()
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true" or choice in ("", "none"):
        return None
    if choice == "console":
        return ConsoleSpanExporter()
    if choice == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    raise ValueError(f"OTEL_TRACES_EXPORTER={choice!r} is not supported (use otlp, console or none)")


def setup_tracing(service: str) -> TracerProvider | None:
    """Record spans only when they go somewhere. With no exporter the API's no-op tracer stays in place: it
    records nothing (no span per SQL statement or per event) yet still hands an incoming trace context on
    to whatever the service publishes, so a trace stays whole across services that do export."""
    exporter = _exporter()
    if exporter is None:
        return None
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", f"cairn-{service}")})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
    trace.set_tracer_provider(provider)
    from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor

    AsyncPGInstrumentor().instrument(tracer_provider=provider)  # type: ignore[no-untyped-call]
    RedisInstrumentor().instrument(tracer_provider=provider)
    return provider


class JsonFormatter(logging.Formatter):
    """One JSON object per line, with the current trace and span ids when there is a span."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname,
            "service": self.service,
            "logger": record.name,
            "message": record.getMessage(),
        }
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            entry["trace_id"] = format(context.trace_id, "032x")
            entry["span_id"] = format(context.span_id, "016x")
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def setup_logging(service: str, settings: TelemetrySettings) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if settings.json_format:
        handler.setFormatter(JsonFormatter(service))
    logging.basicConfig(level=settings.level, handlers=[handler], force=True)
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
