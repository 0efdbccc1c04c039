"""The consumers' figures on /metrics, over an in-memory JetStream: what the delivery code counted, what JetStream
holds for each consumer, the dead letters of this service's consumers only; a JetStream that does not answer costs a
scrape at most the bound and leaves its series out (`cairn_jetstream_figures_up` 0), and is not asked again within
the cache time. The route template a request is counted under, refused before routing or not."""

import asyncio
import datetime
from types import SimpleNamespace
from typing import Any, cast

import nats.js.errors
import pytest
from fastapi import APIRouter
from fastapi.routing import APIRoute
from nats.js.api import ConsumerConfig, ConsumerInfo
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from cairn.delivery.counts import counts_of
from cairn.events import DEAD_LETTER_STREAM
from cairn.platform.consumer_metrics import ConsumerMetrics
from cairn.platform.metrics import UNMATCHED, route_template
from cairn.platform.settings import MetricsSettings

Labels = tuple[tuple[str, str], ...]


class FakeJetStream:
    """`consumer_info` and `stream_info` (per-subject counts of the dead-letter stream) as a server answers them, or,
    `away`, never."""

    def __init__(self, pending: dict[tuple[str, str], int], letters: dict[str, int], away: bool = False) -> None:
        self.pending, self.letters, self.away = pending, letters, away
        self.asked = 0

    async def consumer_info(self, stream: str, consumer: str) -> ConsumerInfo:
        self.asked += 1
        if self.away:
            await asyncio.Event().wait()
        if (consumer, stream) not in self.pending:
            raise nats.js.errors.NotFoundError
        created = datetime.datetime.now(datetime.UTC)
        waiting = self.pending[(consumer, stream)]
        return ConsumerInfo(consumer, stream, ConsumerConfig(), created, num_pending=waiting, num_ack_pending=2)

    async def stream_info(self, name: str, subjects_filter: str | None = None) -> Any:
        assert name == DEAD_LETTER_STREAM
        if self.away:
            await asyncio.Event().wait()
        return SimpleNamespace(state=SimpleNamespace(subjects=self.letters))


def scraped(metrics: ConsumerMetrics) -> dict[tuple[str, Labels], float]:
    registry = CollectorRegistry()
    registry.register(metrics)
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def labels(consumer: str, stream: str) -> Labels:
    return (("consumer", consumer), ("stream", stream))


async def test_the_figures_of_this_services_consumers_with_what_jetstream_holds() -> None:
    ours = [("unit-a", "CAIRN_ONE"), ("unit-a", "CAIRN_TWO"), ("unit-b", "CAIRN_ONE")]
    counts = counts_of("unit-a", "CAIRN_ONE")
    counts.applied, counts.retried_transient, counts.dead_lettered = 7, 3, 1
    letters = {"cairn-dead-letter.unit-a.t1": 2, "cairn-dead-letter.unit-a.t2": 1, "cairn-dead-letter.other.t1": 5}
    js = FakeJetStream({("unit-a", "CAIRN_ONE"): 4, ("unit-a", "CAIRN_TWO"): 0}, letters)
    metrics = ConsumerMetrics(cast(Any, js), ours, MetricsSettings())
    await metrics.refresh()
    figures = scraped(metrics)

    assert figures[("cairn_jetstream_figures_up", ())] == 1.0
    assert figures[("cairn_consumer_events_applied_total", labels("unit-a", "CAIRN_ONE"))] == 7
    assert figures[("cairn_consumer_events_applied_total", labels("unit-b", "CAIRN_ONE"))] == 0
    transient = (*labels("unit-a", "CAIRN_ONE"), ("failure", "transient"))
    assert figures[("cairn_consumer_events_retried_total", tuple(sorted(transient)))] == 3
    assert figures[("cairn_consumer_events_dead_lettered_total", labels("unit-a", "CAIRN_ONE"))] == 1
    assert figures[("cairn_consumer_pending_messages", labels("unit-a", "CAIRN_ONE"))] == 4
    assert figures[("cairn_consumer_ack_pending_messages", labels("unit-a", "CAIRN_TWO"))] == 2
    assert ("cairn_consumer_pending_messages", labels("unit-b", "CAIRN_ONE")) not in figures, "not created yet"
    held = {dict(key)["consumer"]: value for name, key in figures if name == "cairn_dead_letters_held"
            for value in [figures[(name, key)]]}  # fmt: skip
    assert held == {"unit-a": 3, "unit-b": 0}, "every tenant's, of this service's consumers only"


async def test_the_lag_is_the_age_of_the_oldest_event_in_hand_and_zero_without_one() -> None:
    ours = [("unit-lag", "CAIRN_ONE")]
    metrics = ConsumerMetrics(cast(Any, FakeJetStream({}, {})), ours, MetricsSettings())
    lag = ("cairn_consumer_lag_seconds", labels("unit-lag", "CAIRN_ONE"))
    assert scraped(metrics)[lag] == 0.0
    counts_of("unit-lag", "CAIRN_ONE").working_since = datetime.datetime.now(datetime.UTC).timestamp() - 60
    assert scraped(metrics)[lag] >= 60


async def test_a_jetstream_that_does_not_answer_leaves_its_series_out_and_is_not_waited_for_again() -> None:
    ours = [("unit-away", "CAIRN_ONE")]
    counts_of("unit-away", "CAIRN_ONE").applied = 5
    js = FakeJetStream({("unit-away", "CAIRN_ONE"): 1}, {}, away=True)
    metrics = ConsumerMetrics(cast(Any, js), ours, MetricsSettings(nats_wait_s=0.05, cache_s=3600))
    await metrics.refresh()  # returns after the bound: the fake never answers
    figures = scraped(metrics)
    assert figures[("cairn_jetstream_figures_up", ())] == 0.0
    assert figures[("cairn_consumer_events_applied_total", labels("unit-away", "CAIRN_ONE"))] == 5
    assert not any(name in ("cairn_consumer_pending_messages", "cairn_dead_letters_held") for name, _ in figures)
    asked = js.asked
    js.away = False
    await metrics.refresh()
    assert js.asked == asked, "the failure is reused for the cache time"
    assert scraped(metrics)[("cairn_jetstream_figures_up", ())] == 0.0


async def test_a_reading_is_reused_for_the_cache_time_and_renewed_after_it() -> None:
    ours = [("unit-cache", "CAIRN_ONE")]
    js = FakeJetStream({("unit-cache", "CAIRN_ONE"): 1}, {})
    metrics = ConsumerMetrics(cast(Any, js), ours, MetricsSettings(cache_s=3600))
    await asyncio.gather(metrics.refresh(), metrics.refresh())
    assert js.asked == 1, "scrapes arriving together share a reading"
    renewing = ConsumerMetrics(cast(Any, js), ours, MetricsSettings(cache_s=0))
    await renewing.refresh()
    js.pending[("unit-cache", "CAIRN_ONE")] = 9
    await renewing.refresh()
    assert scraped(renewing)[("cairn_consumer_pending_messages", labels("unit-cache", "CAIRN_ONE"))] == 9


def _routes() -> list[APIRoute]:
    router = APIRouter()

    @router.get("/v1/sessions/{session_key:path}/history")
    async def history(session_key: str) -> None: ...

    @router.get("/v1/sessions")
    async def sessions() -> None: ...

    return [r for r in router.routes if isinstance(r, APIRoute)]


@pytest.mark.parametrize(
    ("path", "routed", "expected"),
    [
        ("/v1/sessions/agent:main:main/history", True, "/v1/sessions/{session_key}/history"),
        ("/v1/sessions/agent:main:main/history", False, "/v1/sessions/{session_key}/history"),
        ("/v1/sessions", False, "/v1/sessions"),
        ("/v1/nothing/here", False, UNMATCHED),
    ],
)
def test_a_request_is_counted_under_its_route_template(path: str, routed: bool, expected: str) -> None:
    routes = _routes()
    scope: dict[str, Any] = {"type": "http", "path": path, "method": "GET"}
    if routed:
        scope["route"] = routes[0]
    assert route_template(scope, routes) == expected
