"""The log is on disk before ingest answers 202: the running NATS server fsyncs every write (`sync_interval: always`),
and every stream has the replica count the settings ask for; a count the server cannot keep is refused in words."""

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from nats.aio.client import Client

from cairn.events import STREAMS
from cairn.local import LocalStack
from cairn.local.stack import OWNER
from cairn.platform.nats import StreamReplicasRefused, ensure_streams

pytestmark = pytest.mark.integration


def test_the_running_nats_server_fsyncs_every_write_before_its_ack(stack: LocalStack) -> None:
    """Read from the server itself (its monitoring endpoint), not from what the stack meant to configure."""
    varz = httpx.get(f"{stack.nats_monitor_url}/varz", timeout=10).json()
    jetstream = varz["jetstream"]["config"]
    assert jetstream.get("sync_always") is True, f"JetStream flushes lazily: {jetstream}"
    assert Path(jetstream["store_dir"]).parent == stack.home / "nats", "the stack's own store, on disk"


async def test_every_stream_has_the_configured_replica_count(stack: LocalStack, nats_client: Client) -> None:
    js = nats_client.jetstream()
    for spec in STREAMS:
        info = await js.stream_info(spec.name)
        assert info.config.num_replicas == 1, f"{spec.name}: the local stack's one server keeps one copy"


async def test_more_replicas_than_a_single_server_can_keep_are_refused_in_words(
    stack: LocalStack, nats_client: Client
) -> None:
    js = nats_client.jetstream()
    with pytest.raises(StreamReplicasRefused, match="CAIRN_NATS_STREAM_REPLICAS") as refused:
        await ensure_streams(js, replicas=3)
    assert "replicas > 1 not supported in non-clustered mode" in str(refused.value)
    for spec in STREAMS:
        assert (await js.stream_info(spec.name)).config.num_replicas == 1, "nothing was changed"


def test_migrate_asked_for_replicas_a_single_server_cannot_keep_says_so_and_stops(stack: LocalStack) -> None:
    env = {
        **os.environ,
        "CAIRN_POSTGRES_ADMIN_URL": stack.postgres_url(OWNER),
        "CAIRN_NATS_URL": stack.nats_url,
        "CAIRN_NATS_STREAM_REPLICAS": "3",
    }
    cli = Path(sys.executable).parent / "cairn"
    done = subprocess.run([str(cli), "migrate"], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "NATS refused 3 replicas for stream" in done.stderr
    assert "set CAIRN_NATS_STREAM_REPLICAS to at most the number of clustered NATS servers" in done.stderr
