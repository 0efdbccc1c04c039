"""Which failures are waited out and which belong to the event: what every consumer and worker decides
before it retries, spends a delivery or dead-letters.

A dependency that is away or busy (Postgres restarting, a dropped connection, a serialization failure, a
timeout, NATS or Redis reconnecting) is `TRANSIENT`: retried for as long as it lasts, never dead-lettered and
never counted against the message's deliveries, since the same event applies once the dependency is back.
An event that breaks a rule (undecodable, refused by a handler, a value Postgres cannot store, a constraint it
violates) is `DETERMINISTIC`: it will fail the same way every time, so it is dead-lettered at once with the
reason. Anything else (a bug, most likely) is `UNKNOWN`: retried within the delivery budget, then dead-lettered.
"""

import enum
import random
from collections.abc import Iterator
from dataclasses import dataclass

import asyncpg
import nats.errors
import nats.js.errors
import redis.exceptions
from pydantic import ValidationError

from cairn.storage.postgres import is_lost_connection


class PoisonEvent(Exception):
    """Raised by a handler for an event that can never be applied (it breaks a rule its producer should
    have enforced): the event is dead-lettered at once with this reason instead of being retried."""


class Fault(enum.Enum):
    TRANSIENT = "transient"
    DETERMINISTIC = "deterministic"
    UNKNOWN = "unknown"


# SQLSTATE classes and codes (Postgres appendix A). 08 connection, 53 insufficient resources (too many
# connections, disk full), 57 operator intervention (57P01 admin shutdown, 57P02 crash, 57P03 cannot connect
# now, 57014 statement timeout or cancel), 58 system (I/O) errors.
_TRANSIENT_CLASSES = ("08", "53", "57", "58")
# 40001 serialization, 40P01 deadlock, 40003 completion unknown, 55P03 lock timeout, 55006 object in use,
# 25P03/25P04 idle-in-transaction and transaction timeouts, 0A000 "cached plan must not change result type"
# (a migration changed a table under a prepared statement; the next try prepares it again).
_TRANSIENT_CODES = frozenset({"40001", "40P01", "40003", "55P03", "55006", "25P03", "25P04", "0A000"})
# 22 data exceptions (a NUL, a value out of range), 23 integrity violations, 40002 a deferred constraint at commit.
_DETERMINISTIC_CLASSES = ("22", "23")
_DETERMINISTIC_CODES = frozenset({"40002"})

_TRANSIENT_TYPES: tuple[type[BaseException], ...] = (
    OSError,  # refused, reset, a missing Unix socket, and every TimeoutError (nats-py's and asyncio's included)
    asyncpg.exceptions.OutdatedSchemaCacheError,
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.ConnectionDrainingError,
    nats.errors.NoServersError,
    nats.errors.NoRespondersError,  # JetStream not there (yet): a server restarting or a stream leader moving
    nats.errors.StaleConnectionError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.SlowConsumerError,
    nats.js.errors.ServiceUnavailableError,
    redis.exceptions.ConnectionError,  # BusyLoadingError (a restart loading its data) included
    redis.exceptions.TimeoutError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.ReadOnlyError,  # a replica during a failover
)
_DETERMINISTIC_TYPES: tuple[type[BaseException], ...] = (
    PoisonEvent,
    ValidationError,  # an event that does not decode, or a value a model refuses
    UnicodeError,  # a lone surrogate cannot even be encoded for Postgres
    nats.errors.MaxPayloadError,
)


def classify(error: BaseException) -> Fault:
    """What kind of failure `error` is. An error of an unknown kind caused by a transient one (a client
    library wrapping a dropped connection) is transient; a group is transient when all its errors are."""
    if isinstance(error, BaseExceptionGroup):
        faults = {classify(inner) for inner in error.exceptions}
        return faults.pop() if len(faults) == 1 else Fault.UNKNOWN
    fault = _own_fault(error)
    if fault is Fault.UNKNOWN and any(_own_fault(cause) is Fault.TRANSIENT for cause in _causes(error)):
        return Fault.TRANSIENT
    return fault


def is_transient(error: BaseException) -> bool:
    return classify(error) is Fault.TRANSIENT


def _own_fault(error: BaseException) -> Fault:
    if isinstance(error, asyncpg.PostgresError):
        return _postgres_fault(error)
    if is_lost_connection(error):  # "connection is closed", "pool is closing", an interrupted query: a restart's
        return Fault.TRANSIENT
    if isinstance(error, nats.js.errors.APIError) and (error.code or 0) >= 500:
        return Fault.TRANSIENT  # JetStream answering "no leader", "cluster not available" while it recovers
    if isinstance(error, _TRANSIENT_TYPES):
        return Fault.TRANSIENT
    if isinstance(error, _DETERMINISTIC_TYPES):
        return Fault.DETERMINISTIC
    return Fault.UNKNOWN


def _postgres_fault(error: "asyncpg.PostgresError") -> Fault:
    code = str(getattr(error, "sqlstate", "") or "")
    if code in _TRANSIENT_CODES or code.startswith(_TRANSIENT_CLASSES):
        return Fault.TRANSIENT
    if code in _DETERMINISTIC_CODES or code.startswith(_DETERMINISTIC_CLASSES):
        return Fault.DETERMINISTIC
    return Fault.UNKNOWN


def _causes(error: BaseException) -> Iterator[BaseException]:
    """The explicit causes behind `error` (`raise … from …`), nearest first; bounded against cycles."""
    cause = error.__cause__
    for _ in range(8):
        if cause is None:
            return
        yield cause
        cause = cause.__cause__


def describe(error: BaseException) -> str:
    """How a failure is named in logs, readiness and a dead letter's `Cairn-Error`."""
    if isinstance(error, PoisonEvent):
        return f"poison event: {error}"
    return f"{type(error).__name__}: {error}"


@dataclass(frozen=True)
class Backoff:
    """Capped exponential delays with jitter: the n-th retry waits between half and all of
    `min(cap_s, first_s * 2**n)`, so replicas retrying the same outage spread out and none busy-loops."""

    first_s: float = 0.2
    cap_s: float = 5.0

    def delay(self, attempt: int) -> float:
        ceiling = min(self.cap_s, self.first_s * 2 ** min(attempt, 32))
        return random.uniform(ceiling / 2, ceiling)
