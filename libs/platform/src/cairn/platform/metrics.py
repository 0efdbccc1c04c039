"""A service's Prometheus metrics: its own registry (the process collectors, the HTTP request figures below, and the
consumers' figures of consumer_metrics.py once the lifespan has built them), served at `/metrics` (metrics_api.py).

Labels never name a tenant (one series per tenant would grow without bound; per-tenant figures are in the tenant
APIs, such as `GET /v1/memory/status`) nor a raw path: a request is counted under its route's template
(`/v1/sessions/{session_key}/history`), and one that matched no route under `unmatched`."""

import time
from collections.abc import Iterator, Sequence

from fastapi.routing import APIRoute
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cairn.edge.problems import REFUSAL_REASON
from cairn.edge.rate_limiter import LimitCounters

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})  # others are counted as "other"
UNMATCHED = "unmatched"
# From 1 ms (a cached read) to 30 s (a bounded wait that ran out, a large batch).
LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ServiceMetrics:
    """The registry of one service app and its HTTP figures; a registry per app, so that several apps in one process
    (tests) never mix their figures or register a name twice."""

    def __init__(self) -> None:
        # no `_created` series beside every counter and histogram (a switch of the library, for the whole process):
        # Prometheus reads them as gauges of their own, twice the series for a start time nobody queries
        disable_created_metrics()  # type: ignore[no-untyped-call]  # the library leaves it unannotated
        self.registry = CollectorRegistry()
        self.routes: list[APIRoute] = []
        self.limit_counters = LimitCounters()
        self.registry.register(LimitMetrics(self.limit_counters))
        self._series: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.requests = Counter(
            "cairn_http_requests",
            "HTTP requests answered, by method, route template and status code",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "cairn_http_request_duration_seconds",
            "How long requests took, from their arrival to the last byte of the answer, by method and route template",
            ("method", "route"),
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.refused = Counter(
            "cairn_http_unavailable_responses",
            "Requests answered 503 with Retry-After, by reason: dependency_down (Postgres, NATS or Redis did not "
            "answer within the bound: see dependency) or overload (the process was at CAIRN_HTTP_MAX_CONCURRENCY); "
            "other is a failing /healthz or /readyz",
            ("reason", "dependency"),
            registry=self.registry,
        )

    def know_routes(self, routes: Sequence[APIRoute]) -> None:
        """The routes a request refused before routing is counted under (the first whose path matches)."""
        self.routes = list(routes)

    def observe(self, scope: Scope, status: int, seconds: float) -> None:
        method = scope["method"] if scope["method"] in METHODS else "other"
        route = route_template(scope, self.routes)
        series = self._series.get((method, route, status))
        if series is None:  # `labels()` looks a child up under a lock each time: done once per combination here
            series = self._series[(method, route, status)] = (
                self.requests.labels(method, route, str(status)),
                self.latency.labels(method, route),
            )
        series[0].inc()
        series[1].observe(seconds)
        if status == 503:
            reason, dependency = scope.get(REFUSAL_REASON, ("other", "none"))
            self.refused.labels(reason, dependency).inc()


def route_template(scope: Scope, routes: Sequence[APIRoute]) -> str:
    """The template of the route that answered (FastAPI notes it in the scope when it routes); for a request refused
    before routing (a body over the limit, overload), the template of the first of `routes` its path matches."""
    route = scope.get("route")
    if isinstance(route, BaseRoute):
        template = getattr(route, "path_format", None)
        return template if isinstance(template, str) else UNMATCHED
    path = scope["path"]
    return next((r.path_format for r in routes if r.path_regex.match(path)), UNMATCHED)


class RequestMetrics:
    """ASGI middleware, outermost: counts every answer by method, route template and status and observes its
    duration: a few microseconds per request (a dictionary look-up, a counter and a histogram bucket)."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the server answers when an error escapes before a response started

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.metrics.observe(scope, status, time.perf_counter() - started)


class LimitMetrics(Collector):
    """The rate limits' and quotas' counters (kept as plain integers by cairn.edge, read at each scrape)."""

    def __init__(self, counters: LimitCounters) -> None:
        self.counters = counters

    def collect(self) -> Iterator[Metric]:
        counted = self.counters
        refused = CounterMetricFamily(
            "cairn_rate_limited", "Requests answered 429, by the limit they met", labels=("limit",)
        )
        for limit, count in sorted(counted.refused.items()):
            refused.add_metric((limit,), count)
        yield refused
        yield CounterMetricFamily(
            "cairn_rate_limit_fail_open",
            "Counts (rates, quotas, failed keys) skipped because Redis did not answer in time: let through uncounted",
            value=counted.fail_open,
        )
        yield CounterMetricFamily(
            "cairn_auth_invalid_key_lookups",
            "Invalid API keys looked up in Postgres (neither remembered as invalid nor refused by the throttle)",
            value=counted.invalid_lookups,
        )
        yield CounterMetricFamily(
            "cairn_auth_throttled",
            "Requests answered 429 because their address sent too many invalid keys (no lookup made)",
            value=counted.auth_throttled,
        )
        yield CounterMetricFamily(
            "cairn_auth_invalid_key_cache_hits",
            "Requests with a key found invalid moments before, answered without a lookup",
            value=counted.invalid_key_cache_hits,
        )
