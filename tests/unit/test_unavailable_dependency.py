"""The one mapping from an exception to "a dependency is down" (503 with Retry-After) or not (500): what
asyncpg, nats-py and redis raise while their server is away, and the bugs that look alike but are not."""

import asyncpg
import pytest
from nats import errors as nats_errors
from nats.js import errors as js_errors
from redis.exceptions import ConnectionError as RedisConnectionError

from cairn.delivery.publisher import AckTimeout
from cairn.edge.errors import unavailable_dependency


@pytest.mark.parametrize(
    ("error", "dependency"),
    [
        (asyncpg.exceptions.CannotConnectNowError("the database system is shutting down"), "Postgres"),
        (asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command"), "Postgres"),
        (asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
         "Postgres"),
        (asyncpg.exceptions.TooManyConnectionsError("sorry, too many clients already"), "Postgres"),
        (asyncpg.InterfaceError("pool is closing"), "Postgres"),
        (asyncpg.InternalClientError("cannot switch to state 12; another operation (2) is in progress"), "Postgres"),
        (asyncpg.InterfaceError("cannot call Connection.fetch(): connection is closed"), "Postgres"),
        (AckTimeout(2.0), "NATS"),
        (nats_errors.ConnectionClosedError(), "NATS"),
        (nats_errors.OutboundBufferLimitError(), "NATS"),
        (js_errors.NoStreamResponseError(), "NATS"),
        (RedisConnectionError("Connection refused"), "Redis"),
        (ConnectionRefusedError(111, "Connection refused"), "A dependency"),
        (TimeoutError(), "A dependency"),
    ],
)  # fmt: skip
def test_outages_are_named(error: Exception, dependency: str) -> None:
    assert unavailable_dependency(error) == dependency


def test_an_os_error_is_named_by_the_library_it_came_through() -> None:
    # raised from a frame of an asyncpg module, as its connect does when the Unix socket is gone (Postgres stopped)
    code = compile("raise FileNotFoundError(2, 'No such file')", "asyncpg/connect_utils.py", "exec")
    with pytest.raises(FileNotFoundError) as raised:
        exec(code, {"__name__": "asyncpg.connect_utils"})
    assert unavailable_dependency(raised.value) == "Postgres"


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("a bug"),
        ValueError("bad"),
        KeyError("x"),
        asyncpg.InterfaceError("cannot perform operation: another operation is in progress"),
        asyncpg.exceptions.UniqueViolationError("duplicate key"),
        asyncpg.exceptions.UntranslatableCharacterError("unsupported Unicode escape sequence"),
    ],
)
def test_bugs_and_refusals_are_not_outages(error: Exception) -> None:
    assert unavailable_dependency(error) is None
