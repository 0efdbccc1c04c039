"""A service that records no spans hands a request's trace context on through `HandOnTraceContext` instead of the
OpenTelemetry middleware: what the request publishes carries the same trace headers either way."""

import httpx
import pytest
from fastapi import FastAPI
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.trace import NoOpTracerProvider

from cairn.delivery.publisher import EventPublisher
from cairn.edge.trace_context import HandOnTraceContext
from cairn.platform.metrics import RequestMetrics
from cairn.platform.runtime import create_service_app
from cairn.platform.settings import ServiceSettings

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
REQUEST_HEADERS = [
    {},
    {"traceparent": PARENT},
    {"traceparent": PARENT, "tracestate": "vendor=abc,other=x", "baggage": "tenant=t1,user=u2"},
    {"traceparent": "00-not-a-trace-01", "baggage": "k=v"},  # an invalid parent: baggage only
    {"tracestate": "vendor=abc"},  # state without a parent goes nowhere
]


def _app() -> FastAPI:
    """An endpoint answering with the headers an event it published would carry."""
    app = FastAPI()

    @app.post("/publish")
    async def publish() -> dict[str, str]:
        return EventPublisher.trace_headers()

    @app.get("/fails")
    async def fails() -> None:
        raise RuntimeError("boom")

    return app


def _client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app, raise_app_exceptions=False), base_url="http://t")


@pytest.mark.parametrize("headers", REQUEST_HEADERS)
async def test_the_trace_headers_handed_on_are_those_of_the_no_op_opentelemetry_middleware(
    headers: dict[str, str],
) -> None:
    instrumented, handing_on = _app(), _app()
    FastAPIInstrumentor.instrument_app(instrumented, tracer_provider=NoOpTracerProvider())
    handing_on.add_middleware(HandOnTraceContext)
    async with _client(instrumented) as before, _client(handing_on) as after:
        expected = (await before.post("/publish", headers=headers)).json()
        handed_on = (await after.post("/publish", headers=headers)).json()
        assert handed_on == expected
        if "tracestate" in headers and "traceparent" in headers:
            assert handed_on == headers  # the case that matters: the whole context travels on
        # no context leaks from one request into the next
        assert (await after.post("/publish")).json() == {}
        assert (await after.get("/fails")).status_code == 500
        assert (await after.post("/publish")).json() == {}


def test_a_service_without_an_exporter_hands_the_context_on_without_the_opentelemetry_middleware(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    app = create_service_app("unit", ServiceSettings())
    classes: list[object] = [m.cls for m in app.user_middleware]
    # outside everything but the request metrics (which count what the limits inside refuse)
    assert classes[:2] == [RequestMetrics, HandOnTraceContext]
    assert not getattr(app, "_is_instrumented_by_opentelemetry", False)
