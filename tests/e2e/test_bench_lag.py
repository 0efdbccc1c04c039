"""The index-lag phase of `cairn bench load` through the real API: its worker processes post every message the
schedule holds and report each tenant's positions, the probe process finds its probes, and a worker's failure
comes back to the bench with its traceback instead of a hang."""

import pytest

from cairn.cli.bench_lag import LagPlan, run_phase
from cairn.local import LocalStack
from tests.conftest import Tenant


def _plan(stack: LocalStack, keys: tuple[str, ...]) -> LagPlan:
    endpoints = {"CAIRN_INGEST_URL": stack.url("ingest"), "CAIRN_RECALL_URL": stack.url("recall")}
    return LagPlan(endpoints, keys, rate=20.0, seconds=2.0, workers=2, seed=1, zipf=1.0, batch=5)


@pytest.mark.e2e
def test_the_workers_post_the_schedule_and_the_probes_are_found(
    services: LocalStack, tenant: Tenant, other_tenant: Tenant
) -> None:
    keys = tuple(t.ingest.headers["Authorization"].removeprefix("Bearer ") for t in (tenant, other_tenant))
    lags, tally = run_phase(_plan(services, keys), [(0, "harbour walk"), (1, "lighthouse")] * 20)
    assert tally.accepted == 40, "20 msg/s for 2 s: 8 requests of 5 messages, every one answered"
    assert sum(posted for posted, _ in tally.tenants.values()) == 40
    assert len(tally.behind_ms) == len(tally.answer_ms) == 8
    assert lags
    assert max(lags) < 60_000, "every probe was found"
    positions = {rank: highest for rank, (_, highest) in tally.tenants.items()}
    for rank, highest in positions.items():
        found = (tenant, other_tenant)[rank].search("zzqxjvw", consistent_with=str(highest), visibility="all")
        assert found["indexing"] is False, "the reported position is one the index reaches"


@pytest.mark.e2e
def test_a_failing_worker_fails_the_phase_with_its_reason(services: LocalStack) -> None:
    with pytest.raises(RuntimeError, match="401"):
        run_phase(_plan(services, ("not-a-key",)), [(0, "harbour walk")])
