"""A service's shutdown is bounded step by step: a consumer that will not stop, or a connection that will not
close, is logged and left behind, and everything after it is still closed."""

import asyncio
import logging
from typing import Any, cast

import pytest

from cairn.platform import runtime


class Closable:
    """Stands in for the broker, Redis client and pool: records that it was closed, or hangs."""

    def __init__(self, closed: list[str], name: str, hangs: bool = False) -> None:
        self._closed, self._name, self._hangs = closed, name, hangs

    async def _close(self) -> None:
        if self._hangs:
            await asyncio.Event().wait()
        self._closed.append(self._name)

    stop = aclose = close = _close


async def _stubborn(released: asyncio.Event) -> None:
    """A consumer stuck in a step that swallows its cancellation, until the test releases it."""
    while not released.is_set():
        try:
            await released.wait()
        except asyncio.CancelledError:
            continue


async def _obedient(stopped: list[str]) -> None:
    try:
        await asyncio.sleep(3600)
    finally:
        stopped.append("consumer")


async def test_every_step_runs_though_a_consumer_and_a_connection_hang(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(runtime, "SHUTDOWN_STEP_S", 0.05)
    closed: list[str] = []
    released = asyncio.Event()
    stuck = asyncio.create_task(_stubborn(released), name="stuck@stream")
    fine = asyncio.create_task(_obedient(closed), name="fine@stream")
    await asyncio.sleep(0)
    broker, redis, pool = Closable(closed, "nats", hangs=True), Closable(closed, "redis"), Closable(closed, "postgres")
    with caplog.at_level(logging.INFO, logger=runtime.__name__):
        await asyncio.wait_for(runtime._shut_down("test", [stuck, fine], *cast(Any, (broker, redis, pool))), 5)
    assert closed == ["consumer", "redis", "postgres"]
    messages = [record.getMessage() for record in caplog.records]
    assert any("consumers still stopping" in m and "stuck@stream" in m and "fine" not in m for m in messages)
    assert any("closing nats took over" in m for m in messages)
    assert any("cairn-test stopped in" in m for m in messages)
    released.set()
    await stuck


async def test_a_clean_shutdown_closes_everything_in_order_and_logs_no_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    closed: list[str] = []
    consumer = asyncio.create_task(_obedient(closed), name="fine@stream")
    await asyncio.sleep(0)
    closables = (Closable(closed, "nats"), Closable(closed, "redis"), Closable(closed, "postgres"))
    with caplog.at_level(logging.INFO, logger=runtime.__name__):
        await runtime._shut_down("test", [consumer], *cast(Any, closables))
    assert closed == ["consumer", "nats", "redis", "postgres"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
