"""How an event hands on the trace of what caused it, whether or not this process records spans."""

from collections.abc import Mapping

from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider


def recording() -> bool:
    """Whether spans are recorded (an SDK tracer provider is installed): without one a span records nothing."""
    return isinstance(trace.get_tracer_provider(), TracerProvider)


def handed_on(headers: Mapping[str, str] | None) -> dict[str, str]:
    """The trace headers an event caused by a message with `headers` carries when no span is recorded: its
    trace context as the configured propagators write it, exactly what a no-op span would hand on."""
    if not headers:
        return {}
    carried: dict[str, str] = {}
    propagate.inject(carried, context=propagate.extract(headers))
    return carried
