"""The short form of `make chaos`, on a stack of its own (it kills things): each of the five services,
Postgres, NATS and Redis is killed with SIGKILL in turn under steady writes and searches, started again as
`make up` starts a stopped part, and then every write that was answered 202 is in its transcript and in
search exactly once, no request was answered 500, and every service is ready again."""

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.local import LocalStack
from cairn.local.chaos import FAULTS, ChaosPlan, print_table, run_chaos

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def doomed_stack() -> Iterator[LocalStack]:
    home = Path(tempfile.mkdtemp(prefix="cairn-chaos-", dir=os.environ.get("CAIRN_TEST_TMP", "/tmp")))
    home.chmod(0o755)
    stack = LocalStack(home)
    try:
        stack.up()
        yield stack
    finally:
        stack.down()
        kept = Path(os.environ.get("CAIRN_CHAOS_LOGS", "/tmp/cairn-chaos-logs"))  # apart from the shared stack's
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(home / "logs", kept, dirs_exist_ok=True)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(stack.postgres.base, ignore_errors=True)


@pytest.mark.timeout(900)
async def test_no_acknowledged_write_is_lost_or_doubled_whatever_is_killed(doomed_stack: LocalStack) -> None:
    plan = ChaosPlan(faults=FAULTS, outage_s=8.0, short_outage_s=1.0, steady_s=2.0, pause_s=0.05)

    rows = await run_chaos(doomed_stack, doomed_stack.state.api_key, plan)

    print_table(rows)
    assert [r.fault for r in rows] == [*FAULTS, "cool-down"]
    assert all(r.acknowledged > 0 for r in rows), "every phase had writes answered 202"
    assert [(r.fault, r.acknowledged - r.found) for r in rows if r.found != r.acknowledged] == []
    assert [(r.fault, r.duplicated) for r in rows if r.duplicated] == []
    assert [(r.fault, r.errors_500) for r in rows if r.errors_500] == []
