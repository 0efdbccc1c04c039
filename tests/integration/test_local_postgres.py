"""The local stack reaches Postgres over its Unix-domain socket (the cheaper way on one machine), TCP on request
or when the socket's path would be too long; the services and `bench load`'s raw baseline use that URL."""

import asyncpg
import pytest

from cairn.local import LocalStack
from cairn.local.infra import SHARED_BUFFERS
from cairn.local.stack import MAX_SOCKET_PATH

pytestmark = pytest.mark.integration


async def _server_address(url: str) -> str | None:
    conn = await asyncpg.connect(url)
    try:
        address: str | None = await conn.fetchval("SELECT host(inet_server_addr())")  # NULL over a Unix socket
        return address
    finally:
        await conn.close()


async def test_the_stack_url_reaches_postgres_over_its_unix_socket_and_tcp_on_request(stack: LocalStack) -> None:
    assert stack.postgres_url().startswith(f"postgresql://cairn_app:{stack.state.passwords['cairn_app']}@%2F")
    assert await _server_address(stack.postgres_url("postgres")) is None
    over_tcp = LocalStack(stack.home, durable=False, postgres_over="tcp")
    assert await _server_address(over_tcp.postgres_url("postgres")) == "127.0.0.1"


async def test_services_connect_over_the_socket(services: LocalStack) -> None:
    conn = await asyncpg.connect(services.postgres_url("postgres"))
    try:
        clients = await conn.fetch(
            "SELECT usename, client_addr FROM pg_stat_activity WHERE usename IN ('cairn_app', 'cairn_projector')"
        )
    finally:
        await conn.close()
    assert {r["usename"] for r in clients} == {"cairn_app", "cairn_projector"}
    assert [r for r in clients if r["client_addr"] is not None] == []


async def test_a_socket_path_too_long_falls_back_to_tcp(stack: LocalStack) -> None:
    far = LocalStack(stack.home / ("d" * MAX_SOCKET_PATH), durable=False)
    far.state.ports, far.state.passwords = dict(stack.state.ports), dict(stack.state.passwords)
    assert len(str(far.postgres.data)) > MAX_SOCKET_PATH
    assert far.postgres_url() == (
        f"postgresql://cairn_app:{stack.state.passwords['cairn_app']}@127.0.0.1:{stack.state.ports['postgres']}/cairn"
    )
    # the same port: an existing server is reachable through it
    assert await _server_address(far.postgres_url("postgres")) == "127.0.0.1"


async def test_postgres_runs_with_the_buffer_cache_of_the_k8s_cluster(stack: LocalStack) -> None:
    """Not the default 128 MB, which a 100k-chunk agent's memory search reads through on every query."""
    conn = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        assert await conn.fetchval("SHOW shared_buffers") == SHARED_BUFFERS == "1GB"
    finally:
        await conn.close()
