"""`classify` decides what every consumer does with a failure: a transient one is waited out (never
dead-lettered, no delivery spent), a deterministic one is dead-lettered at once, anything else is retried
within the delivery budget. A table of the failures seen in practice, each with the kind it must be."""

import json

import asyncpg
import nats.errors
import nats.js.errors
import pytest
import redis.exceptions
from pydantic import BaseModel, ValidationError

from cairn.delivery.faults import Backoff, Fault, PoisonEvent, classify, describe, is_transient


def postgres(sqlstate: str, message: str = "from the server") -> asyncpg.PostgresError:
    """An error as asyncpg builds it from a server's ErrorResponse: its class chosen by the SQLSTATE."""
    error: asyncpg.PostgresError = asyncpg.PostgresError.new({"C": sqlstate, "M": message, "S": "ERROR"})
    return error


class Strict(BaseModel):
    count: int


def validation_error() -> ValidationError:
    try:
        Strict.model_validate_json(json.dumps({"count": "many"}))
    except ValidationError as error:
        return error
    raise AssertionError("the model accepted a bad value")


def wrapped(cause: BaseException) -> RuntimeError:
    """A client library's own error around what went wrong underneath (`raise … from …`)."""
    try:
        raise RuntimeError("embedding request failed") from cause
    except RuntimeError as error:
        return error


TRANSIENT = [
    pytest.param(ConnectionRefusedError(111, "Connection refused"), id="refused"),
    pytest.param(ConnectionResetError(104, "Connection reset by peer"), id="reset"),
    pytest.param(FileNotFoundError(2, "no Unix socket: Postgres is not running"), id="socket-missing"),
    pytest.param(OSError(113, "No route to host"), id="os-error"),
    pytest.param(TimeoutError(), id="timeout"),
    pytest.param(asyncpg.PostgresConnectionError("connection lost"), id="postgres-connection"),
    pytest.param(
        asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
        id="connection-does-not-exist",
    ),
    pytest.param(asyncpg.CannotConnectNowError("the database system is starting up"), id="57P03-starting"),
    pytest.param(postgres("57P01", "terminating connection due to administrator command"), id="57P01-shutdown"),
    pytest.param(postgres("57P02"), id="57P02-crash-shutdown"),
    pytest.param(postgres("57014", "canceling statement due to statement timeout"), id="57014-statement-timeout"),
    pytest.param(postgres("55P03", "canceling statement due to lock timeout"), id="55P03-lock-timeout"),
    pytest.param(postgres("40001", "could not serialize access"), id="40001-serialization"),
    pytest.param(postgres("40P01", "deadlock detected"), id="40P01-deadlock"),
    pytest.param(postgres("53300", "sorry, too many clients already"), id="53300-too-many-connections"),
    pytest.param(postgres("08006"), id="08006-connection-failure"),
    pytest.param(postgres("25P03", "idle-in-transaction timeout"), id="25P03-idle-in-transaction"),
    pytest.param(asyncpg.InterfaceError("connection is closed"), id="interface-connection-closed"),
    pytest.param(asyncpg.InterfaceError("pool is closing"), id="interface-pool-closing"),
    pytest.param(  # a query the server's death interrupted leaves its connection in the middle of it
        asyncpg.InternalClientError("cannot switch to state 12; another operation (2) is in progress"),
        id="interrupted-query",
    ),
    pytest.param(nats.errors.ConnectionClosedError(), id="nats-closed"),
    pytest.param(nats.errors.TimeoutError(), id="nats-timeout"),
    pytest.param(nats.errors.NoRespondersError(), id="nats-no-responders"),
    pytest.param(nats.errors.ConnectionReconnectingError(), id="nats-reconnecting"),
    pytest.param(nats.errors.NoServersError(), id="nats-no-servers"),
    pytest.param(nats.js.errors.ServiceUnavailableError(code=503), id="jetstream-503"),
    pytest.param(nats.js.errors.APIError(code=500, description="jetstream cluster not available"), id="jetstream-500"),
    pytest.param(redis.exceptions.ConnectionError("Connection refused"), id="redis-connection"),
    pytest.param(redis.exceptions.TimeoutError("Timeout reading from socket"), id="redis-timeout"),
    pytest.param(redis.exceptions.BusyLoadingError("Redis is loading the dataset"), id="redis-loading"),
    pytest.param(wrapped(ConnectionResetError(104, "reset")), id="wrapping-a-reset"),
    pytest.param(ExceptionGroup("both away", [TimeoutError(), postgres("57P01")]), id="group-of-transients"),
]

DETERMINISTIC = [
    pytest.param(PoisonEvent("memory write outside the folder"), id="poison-event"),
    pytest.param(validation_error(), id="validation"),
    pytest.param(postgres("22021", 'invalid byte sequence for encoding "UTF8": 0x00'), id="22021-nul"),
    pytest.param(postgres("22008", "timestamp out of range"), id="22008-timestamp-out-of-range"),
    pytest.param(postgres("22003", "integer out of range"), id="22003-numeric-out-of-range"),
    pytest.param(postgres("23505", "duplicate key value violates unique constraint"), id="23505-unique"),
    pytest.param(postgres("23502", "null value in column violates not-null constraint"), id="23502-not-null"),
    pytest.param(postgres("23514", "new row violates check constraint"), id="23514-check"),
    pytest.param(postgres("40002", "deferred constraint at commit"), id="40002-deferred-constraint"),
    pytest.param(UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), id="lone-surrogate"),
    pytest.param(nats.errors.MaxPayloadError(), id="nats-payload-too-large"),
]

UNKNOWN = [
    pytest.param(RuntimeError("a handler's bug"), id="runtime-error"),
    pytest.param(TypeError("can't compare offset-naive and offset-aware datetimes"), id="type-error"),
    pytest.param(KeyError("missing"), id="key-error"),
    pytest.param(postgres("42703", 'column "new_column" does not exist'), id="42703-migration-not-applied"),
    pytest.param(postgres("P0001", "raised by a function"), id="P0001-raise"),
    pytest.param(
        asyncpg.InterfaceError("cannot perform operation: another operation is in progress"), id="interface-misuse"
    ),
    pytest.param(nats.js.errors.BadRequestError(code=400, description="bad request"), id="jetstream-400"),
    pytest.param(wrapped(KeyError("x")), id="wrapping-a-bug"),
    pytest.param(ExceptionGroup("mixed", [TimeoutError(), RuntimeError("bug")]), id="group-transient-and-bug"),
]


@pytest.mark.parametrize("error", TRANSIENT)
def test_a_dependency_away_or_busy_is_transient(error: BaseException) -> None:
    assert classify(error) is Fault.TRANSIENT
    assert is_transient(error)


@pytest.mark.parametrize("error", DETERMINISTIC)
def test_what_the_event_itself_breaks_is_deterministic(error: BaseException) -> None:
    assert classify(error) is Fault.DETERMINISTIC
    assert not is_transient(error)


@pytest.mark.parametrize("error", UNKNOWN)
def test_anything_else_is_unknown(error: BaseException) -> None:
    assert classify(error) is Fault.UNKNOWN


def test_a_dead_letter_names_the_failure() -> None:
    assert describe(PoisonEvent("no such path")) == "poison event: no such path"
    assert describe(postgres("22021", "invalid byte")) == "CharacterNotInRepertoireError: invalid byte"


@pytest.mark.parametrize("attempt", range(12))
def test_the_backoff_grows_to_its_cap_with_jitter_never_zero(attempt: int) -> None:
    backoff = Backoff(first_s=0.2, cap_s=5.0)
    ceiling = min(5.0, 0.2 * 2**attempt)
    delays = [backoff.delay(attempt) for _ in range(50)]
    assert all(ceiling / 2 <= d <= ceiling for d in delays)
    assert len(set(delays)) > 1, "jittered: replicas retrying one outage spread out"
