"""The log is on disk before ingest answers 202: the running NATS server fsyncs every write (`sync_interval: always`),
and every stream has the replica count the settings ask for; a count the server cannot keep is refused in words.
Every stream takes atomic batches (`allow_atomic`), which the publisher uses to pay one fsync per batch, and
`cairn migrate` turns that on for streams declared before it."""

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import nats
import nats.errors
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext

from cairn.delivery.nats import StreamReplicasRefused, ensure_streams
from cairn.events import STREAMS
from cairn.local import LocalStack
from cairn.local.infra import nats_binary, nats_config
from cairn.local.processes import free_port, spawn, stop_pid, wait_for_port
from cairn.local.stack import OWNER
from tests.integration.conftest import eventually

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


async def _config_on_the_server(nc: Client, stream: str) -> dict[str, object]:
    """The stream's configuration as the server answers it (raw JSON: not what nats-py makes of it)."""
    answer = json.loads((await nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=10)).data)
    config: dict[str, object] = answer["config"]
    return config


async def test_every_stream_takes_atomic_batches(stack: LocalStack, nats_client: Client) -> None:
    for spec in STREAMS:
        assert (await _config_on_the_server(nats_client, spec.name)).get("allow_atomic") is True, spec.name


async def test_migrate_lets_streams_declared_before_atomic_batches_take_them(
    stack: LocalStack, nats_client: Client
) -> None:
    js = nats_client.jetstream()
    for spec in STREAMS:  # as an older release declared them
        config = (await js.stream_info(spec.name)).config
        config.allow_atomic = False
        await js.update_stream(config)
        assert (await _config_on_the_server(nats_client, spec.name)).get("allow_atomic") in (None, False)
    env = {**os.environ, "CAIRN_POSTGRES_ADMIN_URL": stack.postgres_url(OWNER), "CAIRN_NATS_URL": stack.nats_url}
    cli = Path(sys.executable).parent / "cairn"
    done = await asyncio.to_thread(subprocess.run, [str(cli), "migrate"], env=env, stdin=subprocess.DEVNULL,
                                   capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    for spec in STREAMS:
        assert (await _config_on_the_server(nats_client, spec.name)).get("allow_atomic") is True, spec.name


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


@pytest.fixture(scope="module")
def nats_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Three clustered NATS servers on 127.0.0.1, configured as the local stack's server is (fsync always), as the
    Helm values run them; yields the first one's client URL."""
    home = tmp_path_factory.mktemp("nats-cluster")
    clients, routes = [free_port() for _ in range(3)], [free_port() for _ in range(3)]
    pids = []
    try:
        for n, (client, route) in enumerate(zip(clients, routes, strict=True)):
            config = nats_config(home / f"n{n}", client, free_port()) + "\n".join([
                f"server_name: n{n}",
                "cluster {",
                "  name: cairn-test",
                f'  listen: "127.0.0.1:{route}"',
                f"  routes: [{', '.join(f'nats://127.0.0.1:{r}' for r in routes if r != route)}]",
                "}",
                "",
            ])  # fmt: skip
            (home / f"n{n}.conf").write_text(config)
            pids.append(spawn([str(nats_binary()), "-c", str(home / f"n{n}.conf")], home / f"n{n}.log"))
        for client, pid in zip(clients, pids, strict=True):
            wait_for_port(client, 30, pid)
        yield f"nats://127.0.0.1:{clients[0]}"  # a client learns the others from it
    finally:
        for pid in pids:
            stop_pid(pid)


async def _jetstream_ready(url: str) -> JetStreamContext:
    """Once the cluster has elected its JetStream meta leader (a few seconds after start)."""
    nc = await nats.connect(url)
    js = nc.jetstream()

    async def answers() -> bool:
        try:
            await js.account_info()
        except (nats.errors.Error, TimeoutError):
            return False
        return True

    assert await eventually(answers, within=30.0, interval=0.2), "the cluster elected no JetStream leader"
    return js


async def test_migrate_raises_the_replicas_of_existing_streams_on_a_cluster(
    stack: LocalStack, nats_cluster: str
) -> None:
    """Streams an older release declared with one replica get three from the next `cairn migrate`, keeping what they
    hold; the servers then each keep a copy (the leader and two followers)."""
    js = await _jetstream_ready(nats_cluster)
    try:
        await ensure_streams(js, replicas=1)
        await js.publish("cairn.t.main.recall.performed", b"kept", stream="CAIRN_RECALL")
        env = {**os.environ, "CAIRN_POSTGRES_ADMIN_URL": stack.postgres_url(OWNER), "CAIRN_NATS_URL": nats_cluster,
               "CAIRN_NATS_STREAM_REPLICAS": "3"}  # fmt: skip
        cli = Path(sys.executable).parent / "cairn"
        done = await asyncio.to_thread(subprocess.run, [str(cli), "migrate"], env=env, stdin=subprocess.DEVNULL,
                                       capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "streams declared (3 replicas each)" in done.stdout
        assert {f"  {spec.name}: replicas 1 -> 3" for spec in STREAMS} <= set(done.stdout.splitlines())
        for spec in STREAMS:
            info = await js.stream_info(spec.name)
            assert info.config.num_replicas == 3, spec.name
            assert info.cluster is not None
            assert len(info.cluster.replicas or []) == 2, f"{spec.name}: a leader and two followers"
        assert (await js.get_msg("CAIRN_RECALL", 1)).data == b"kept"
    finally:
        await js._nc.close()
