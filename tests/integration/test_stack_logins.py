"""The embedded stack asks every client for its login (issue 31): Postgres takes no login without its role's
password (scram-sha-256, over TCP and over the socket), Redis no command before AUTH, NATS no anonymous client; a
service's NATS user cannot publish into the adapters' `cairn.in.>`; the passwords live in 0600 files only."""

import asyncio
import stat
from urllib.parse import quote

import asyncpg
import nats
import pytest
import redis.asyncio
import redis.exceptions
from nats.aio.msg import Msg

from cairn.local import LocalStack
from cairn.local.stack import OWNER
from tests.nats_logins import login_answer

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("user", ["postgres", OWNER, "cairn_app", "cairn_projector"])
async def test_postgres_refuses_a_login_without_its_password_over_tcp_and_the_socket(
    stack: LocalStack, user: str
) -> None:
    port = stack.state.ports["postgres"]
    socket = quote(str(stack.postgres.data), safe="")
    for where in (f"127.0.0.1:{port}", f"{socket}:{port}"):
        for login in (user, f"{user}:wrong"):
            with pytest.raises((asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError)):
                await asyncpg.connect(f"postgresql://{login}@{where}/cairn", timeout=10)
    conn = await asyncpg.connect(stack.postgres_url(user), timeout=10)  # with it, the login works
    try:
        assert await conn.fetchval("SELECT current_user") == user
    finally:
        await conn.close()


async def test_redis_answers_nothing_before_auth(stack: LocalStack) -> None:
    port = stack.state.ports["redis"]
    anonymous = redis.asyncio.Redis(host="127.0.0.1", port=port, socket_timeout=5)
    try:
        with pytest.raises(redis.exceptions.AuthenticationError):
            await anonymous.get("anything")
    finally:
        await anonymous.aclose()
    logged_in = redis.asyncio.Redis.from_url(stack.redis_url, socket_timeout=5)
    try:
        assert await logged_in.ping()
    finally:
        await logged_in.aclose()


async def test_nats_refuses_an_anonymous_client_and_a_wrong_password(stack: LocalStack) -> None:
    """Spoken in the protocol itself (nats-py leaves a refused connection's socket open): CONNECT, then PING."""
    for login in ({}, {"user": "cairn-operator", "pass": "wrong"}, {"user": "cairn-ingest", "pass": "wrong"}):
        assert "Authorization Violation" in await login_answer(stack.state.ports["nats"], login)
    operator = {"user": "cairn-operator", "pass": stack.state.password("nats:cairn-operator")}
    assert await login_answer(stack.state.ports["nats"], operator) == "PONG"


async def test_a_services_nats_user_cannot_publish_into_the_adapters_subjects(stack: LocalStack) -> None:
    """What an adapter publishes to `cairn.in.<tenant>.message` is stored in that tenant's name: no service (and so
    nobody holding a service's password) may write there; the operator's user sees whether anything arrived."""
    watcher = await nats.connect(stack.nats_url)
    refused = asyncio.Event()

    async def noted(error: Exception) -> None:
        if "permissions violation" in str(error).lower():
            refused.set()

    service = await nats.connect(stack.nats_url_as("cairn-ingest"), error_cb=noted, allow_reconnect=False)
    arrived: list[Msg] = []

    async def seen(msg: Msg) -> None:
        arrived.append(msg)

    try:
        await watcher.subscribe("cairn.in.>", cb=seen)
        await watcher.flush()
        await service.publish("cairn.in.9c62dcb2-58bd-4e16-8e04-33e2f4213aab.message", b"{}")
        await service.publish("cairn.probe.allowed", b"{}")  # an event subject: allowed, and flushes the other
        await service.flush()
        await watcher.flush()
        async with asyncio.timeout(5):
            await refused.wait()
        assert arrived == []
    finally:
        await service.close()
        await watcher.close()


def test_the_passwords_are_in_files_only_their_owner_reads(stack: LocalStack) -> None:
    for path in (stack.state_file, stack.home / "nats.conf", stack.home / "redis" / "auth.conf",
                 stack.home / "endpoints.env"):  # fmt: skip
        if path.exists():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stack.state.passwords, "the stack keeps its logins' passwords"
