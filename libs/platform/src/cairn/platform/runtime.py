"""The composition root every service shares: settings in, pools and broker built in the lifespan,
health endpoints, problem+json errors, telemetry, and the uvicorn runner."""

import asyncio
import gc
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import asyncpg
import uvicorn
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from faststream.nats import NatsBroker
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from cairn.delivery.partitioned import PartitionedConsumers
from cairn.delivery.publisher import EventPublisher
from cairn.delivery.pull import Consumer, PullConsumer
from cairn.delivery.retention import keep_sweeping, recording_consumers
from cairn.delivery.supervision import Health, Restarts, supervise
from cairn.edge.auth import ApiKeys
from cairn.edge.errors import ErrorsAsProblems
from cairn.edge.key_revocations import RevocationListener
from cairn.edge.limit_store import LimitStore
from cairn.edge.limits import BodyLimit, ConcurrencyLimit
from cairn.edge.openapi import document_problems
from cairn.edge.problems import install_problem_handlers
from cairn.edge.protocols import with_header_timeout
from cairn.edge.query import EmptyQueryParamsAreAbsent
from cairn.edge.rate_limiter import RateLimiter
from cairn.edge.rate_limits import Limits, RateLimits
from cairn.edge.trace_context import HandOnTraceContext
from cairn.platform.consumer_metrics import ConsumerMetrics, pull_consumers
from cairn.platform.metrics import RequestMetrics, ServiceMetrics
from cairn.platform.metrics_api import metrics_router
from cairn.platform.settings import ServiceSettings
from cairn.platform.telemetry import setup_logging, setup_tracing
from cairn.storage.postgres import create_pool, ping

log = logging.getLogger(__name__)
SettingsT = TypeVar("SettingsT", bound=ServiceSettings)
# How long each shutdown step may take; together they stay under the 10 s a local stop waits before SIGKILL.
SHUTDOWN_STEP_S = 2.0


@dataclass
class Runtime:
    """The live resources of one service process, passed down to its handlers and routes."""

    name: str
    settings: ServiceSettings
    pool: "asyncpg.Pool[asyncpg.Record]"
    broker: NatsBroker
    publisher: EventPublisher
    redis: "Redis"
    extras: dict[str, Any]


# Builds a service's stores into `runtime.extras` and returns the consumers it runs.
Wiring = Callable[[Runtime], Sequence[Consumer]]


def redis_client(url: str) -> "Redis":
    """A client that reconnects and retries a command whose connection dropped (a Redis restart), instead
    of failing the first request after it; `from_url` alone sets no retry."""
    retry = Retry(ExponentialBackoff(cap=0.5, base=0.05), 3)
    return Redis.from_url(url, retry=retry, retry_on_error=[RedisConnectionError, RedisTimeoutError])


def runtime_of(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def settings_of(request: Request, kind: type[SettingsT]) -> SettingsT:
    """The service's own settings class, typed, for routes that need its fields."""
    return runtime_settings(runtime_of(request), kind)


def runtime_settings(runtime: Runtime, kind: type[SettingsT]) -> SettingsT:
    """`settings_of` for code that holds the runtime rather than a request."""
    settings = runtime.settings
    if not isinstance(settings, kind):
        raise TypeError(f"this service runs with {type(settings).__name__}, not {kind.__name__}")
    return settings


async def _readiness(runtime: Runtime) -> dict[str, str]:
    checks: dict[str, str] = {}
    try:
        await ping(runtime.pool)
        checks["postgres"] = "ok"
    except (OSError, asyncpg.PostgresError) as error:
        checks["postgres"] = f"failing: {error}"
    checks["nats"] = "ok" if await runtime.broker.ping(timeout=2.0) else "failing: not connected"
    supervision = runtime.settings.supervision
    problems = [f"{h.name} {problem}" for h in _healths(runtime) if (problem := h.problem(supervision))]
    checks["consumers"] = f"failing: {'; '.join(problems)}" if problems else "ok"
    try:
        await runtime.redis.ping()
        checks["redis"] = "ok"
    except (OSError, ConnectionError) as error:
        checks["redis"] = f"failing: {error}"
    return checks


def _healths(runtime: Runtime) -> list[Health]:
    """Every supervised task's health, with the partitions a partitioned consumer runs now."""
    tasks: list[Health | PartitionedConsumers] = runtime.extras.get("healths", [])
    return [h for task in tasks for h in (task.healths() if isinstance(task, PartitionedConsumers) else [task])]


def _liveness(runtime: Runtime) -> dict[str, str]:
    """Not live: the NATS client gave up for good, or a task keeps crashing however often it is restarted in
    the process (supervision.py); a new process is the remaining remedy. A dependency that is down is not a
    reason: a new process would find it down just the same."""
    checks: dict[str, str] = {}
    if runtime.broker.connection.is_closed:
        checks["nats"] = "failing: the connection is closed for good"
    supervision = runtime.settings.supervision
    for health in _healths(runtime):
        if not health.live(supervision):
            checks[health.name] = f"failing: crashed {health.crashes_in_row} times in a row: {health.reason}"
    return checks


def _supervised(consumer: Consumer, restarts: Restarts) -> "tuple[asyncio.Task[None], Health | PartitionedConsumers]":
    """A consumer's loop as a supervised task, and what reports its health (a pull consumer's or partitioned
    consumers' own, which their loops keep up to date; a plain worker's only by its supervisor)."""
    if isinstance(consumer, PullConsumer | PartitionedConsumers):
        health = consumer.health
    else:
        health = Health(f"{consumer.consumer}@{consumer.stream}")
    task = asyncio.create_task(supervise(consumer.run, health, restarts), name=health.name)
    return task, consumer if isinstance(consumer, PartitionedConsumers) else health


def _report_stopped(task: "asyncio.Task[None]") -> None:
    """A supervised loop only ends by cancellation or by finishing its work; an error escaping its supervisor
    would be a bug there, logged."""
    if not task.cancelled() and task.exception() is not None:
        log.error("consumer %s stopped", task.get_name(), exc_info=task.exception())


def health_router() -> APIRouter:
    router = APIRouter(tags=["health"])

    @router.get("/healthz")
    async def healthz(request: Request) -> JSONResponse:
        runtime: Runtime | None = getattr(request.app.state, "runtime", None)
        checks = {} if runtime is None else _liveness(runtime)
        if checks:
            return JSONResponse({"status": "failing", **checks}, status_code=503)
        return JSONResponse({"status": "ok"})

    @router.get("/readyz")
    async def readyz(request: Request) -> JSONResponse:
        runtime: Runtime | None = getattr(request.app.state, "runtime", None)
        if runtime is None:
            return JSONResponse({"status": "starting"}, status_code=503)
        checks = await _readiness(runtime)
        ready = all(v == "ok" for v in checks.values())
        return JSONResponse({"status": "ready" if ready else "not ready", **checks}, status_code=200 if ready else 503)

    return router


async def _shut_down(
    name: str,
    consumers: "list[asyncio.Task[None]]",
    broker: NatsBroker,
    redis: "Redis",
    pool: "asyncpg.Pool[asyncpg.Record]",
) -> None:
    """Stop the consumers first (they give back what they had not finished and release their partitions,
    which needs NATS and Redis), then close the connections. Every step is bounded and logged: a step that
    hangs must not keep the process alive until its orchestrator kills it (10 s locally, 30 s on Kubernetes),
    since a killed replica holds its partitions, unread, until their leases expire."""
    started = time.monotonic()
    for task in consumers:
        task.cancel()
    if consumers:
        _, stuck = await asyncio.wait(consumers, timeout=SHUTDOWN_STEP_S)
        if stuck:
            log.error("cairn-%s: consumers still stopping after %.0fs: %s", name, SHUTDOWN_STEP_S,
                      ", ".join(sorted(task.get_name() for task in stuck)))  # fmt: skip
    steps: list[tuple[str, Callable[[], Awaitable[object]]]] = [("nats", broker.stop), ("redis", redis.aclose)]
    steps.append(("postgres", pool.close))
    for what, close in steps:
        try:
            await asyncio.wait_for(close(), SHUTDOWN_STEP_S)
        except TimeoutError:
            log.error("cairn-%s: closing %s took over %.0fs, left to the exit", name, what, SHUTDOWN_STEP_S)
    log.info("cairn-%s stopped in %.2fs", name, time.monotonic() - started)


YOUNG_COLLECTION_OBJECTS = 10_000  # new tracked objects between two collections of the youngest generation


def settle_heap() -> None:
    """Keep the cyclic garbage collector off what startup built (modules, the app, the embedding model: some
    120,000 objects that live as long as the process): frozen, a full collection no longer walks them (it
    cost ~0.14 s of CPU each in session and indexer, every few thousand events). And collect the youngest
    generation every 10,000 new objects instead of 700: under load nearly every young object is an event,
    batch or row still in use, walked for nothing and promoted towards the next full collection (in the
    ingest bench GC was ~14 % of session's CPU and ~10 % of the indexer's). Garbage without cycles goes by
    reference counting as before; cycles wait for a collection a little longer."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_OBJECTS, older, oldest)


def _limits(runtime: Runtime, metrics: ServiceMetrics) -> Limits:
    """The process's rate limits and quotas, their counters shown at /metrics."""
    settings = runtime.settings
    limits = Limits(
        settings=settings.limits,
        keys=runtime.extras["api_keys"],
        store=LimitStore(runtime.pool, settings.limits, settings.http.dependency_timeout_s),
        limiter=RateLimiter(runtime.redis, settings.limits, metrics.limit_counters),
        counters=metrics.limit_counters,
    )
    return limits


def create_service_app(
    name: str,
    settings: ServiceSettings,
    routers: Sequence[APIRouter] = (),
    wire: Wiring | None = None,
    description: str = "",
    projector: bool = False,
) -> FastAPI:
    """Build a service's ASGI app; nothing connects until the lifespan starts. A `projector` service (no
    tenant-facing HTTP) logs in to Postgres as cairn_projector, so its projections may apply a fetched batch
    of many tenants in one transaction (the policy `tenant_batch`, platform schema baseline)."""
    setup_logging(name, settings.telemetry)
    tracer_provider = setup_tracing(name)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        pool = await create_pool(
            settings.postgres.projector() if projector else settings.postgres,
            connect_timeout_s=settings.http.dependency_timeout_s,  # a Postgres that is down fails fast
        )
        broker = NatsBroker(
            settings.nats.url,
            name=f"cairn-{name}",
            drain_timeout=1,  # only what a consumer failed to unsubscribe is drained; it must not stall the stop
            logger=None,  # it only holds the connection here: our pull consumers log their own errors
            max_reconnect_attempts=-1,
        )
        redis = redis_client(settings.redis.url)
        await broker.connect()
        runtime = Runtime(name, settings, pool, broker, EventPublisher(broker.connection.jetstream()), redis, {})
        keys = runtime.extras["api_keys"] = ApiKeys(pool)
        runtime.extras["limits"] = _limits(runtime, metrics)
        await broker.start()
        # every service authenticates with the same keys, so every one listens for their revocation
        wired = [*(wire(runtime) if wire else ()), RevocationListener(redis, keys)]
        restarts = Restarts.of(settings.supervision)
        supervised = [_supervised(p, restarts) for p in wired]
        if recording := recording_consumers(wired):
            sweep = Health("processed-records-sweep")
            task = asyncio.create_task(supervise(lambda: keep_sweeping(pool, recording, settings.processed), sweep,
                                                 restarts), name=sweep.name)  # fmt: skip
            supervised.append((task, sweep))
        consumers = [task for task, _ in supervised]
        for task in consumers:
            task.add_done_callback(_report_stopped)
        runtime.extras["consumers"] = consumers
        runtime.extras["healths"] = [health for _, health in supervised]
        followed = ConsumerMetrics(runtime.publisher.js, pull_consumers(wired), settings.metrics)
        metrics.registry.register(followed)
        app.state.consumer_metrics = followed
        app.state.runtime = runtime
        settle_heap()
        log.info("cairn-%s ready on %s:%d", name, settings.http.host, settings.http.port)
        try:
            yield
        finally:
            metrics.registry.unregister(followed)
            await _shut_down(name, consumers, broker, redis, pool)

    metrics = ServiceMetrics()
    app = FastAPI(title=f"cairn {name}", description=description, version="1", lifespan=lifespan)
    install_problem_handlers(app)
    # add_middleware puts each outside the ones before it: the limits and the error answers run inside the
    # trace context (added last), so a 500 carries the request's trace id
    app.add_middleware(EmptyQueryParamsAreAbsent)
    app.add_middleware(BodyLimit, max_bytes=settings.http.max_body_bytes, body_timeout_s=settings.http.body_timeout_s)
    app.add_middleware(RateLimits)
    app.add_middleware(ErrorsAsProblems, dependency_timeout_s=settings.http.dependency_timeout_s)
    app.add_middleware(ConcurrencyLimit, max_requests=settings.http.max_concurrency)
    served = [health_router(), metrics_router(metrics, settings.metrics), *routers]
    for router in served:
        app.include_router(router)
    metrics.know_routes([route for router in served for route in router.routes if isinstance(route, APIRoute)])
    document_problems(app)
    if tracer_provider is None:
        app.add_middleware(HandOnTraceContext)
    else:
        FastAPIInstrumentor.instrument_app(app, tracer_provider=tracer_provider, excluded_urls="healthz,readyz,metrics")
    app.add_middleware(RequestMetrics, metrics=metrics)  # outermost: what the limits refuse is counted too
    return app


def server_options(settings: ServiceSettings) -> dict[str, Any]:
    """How every service listens (`uvicorn.run`'s and `uvicorn.Config`'s keywords): its keep-alive, loop and
    parser, the parser with a header-read timeout."""
    http = settings.http
    return {
        "host": http.host, "port": http.port, "timeout_keep_alive": http.keep_alive_s, "log_config": None,
        "access_log": False, "loop": http.loop, "http": with_header_timeout(http.parser, http.header_timeout_s),
    }  # fmt: skip


def serve(app: FastAPI, settings: ServiceSettings) -> None:
    uvicorn.run(app, **server_options(settings))
