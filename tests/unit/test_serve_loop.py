"""Services run on uvloop with the httptools parser by default (less CPU per message in every service), and
either can be switched back to asyncio's loop or h11 by setting."""

import asyncio
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from cairn.edge.settings import HttpSettings
from cairn.platform import runtime
from cairn.platform.settings import ServiceSettings


def served_with(monkeypatch: pytest.MonkeyPatch, settings: ServiceSettings) -> uvicorn.Config:
    """The uvicorn configuration `serve` would run, loaded (its loop and parser imported) but not started."""
    asked: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: asked.update(options))
    runtime.serve(FastAPI(), settings)
    config = uvicorn.Config(FastAPI(), **asked)
    config.load()
    return config


def test_services_run_on_uvloop_and_httptools(monkeypatch: pytest.MonkeyPatch) -> None:
    config = served_with(monkeypatch, ServiceSettings())
    assert issubclass(config.http_protocol_class, HttpToolsProtocol)  # with a header-read timeout
    factory = config.get_loop_factory()
    assert factory is not None
    loop = factory()
    try:
        assert type(loop).__module__.startswith("uvloop")
    finally:
        loop.close()


def test_asyncio_and_h11_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = ServiceSettings(http=HttpSettings(loop="asyncio", parser="h11"))
    config = served_with(monkeypatch, settings)
    assert issubclass(config.http_protocol_class, H11Protocol)
    factory = config.get_loop_factory()
    assert factory is not None
    loop = factory()
    try:
        assert isinstance(loop, asyncio.BaseEventLoop)
        assert not type(loop).__module__.startswith("uvloop")
    finally:
        loop.close()
