"""The local embedder encodes one slice at a time, and a caller cancelled while its slice is encoding (a recall at
its deadline) keeps the turn until its thread has ended: the next caller's encoding never runs beside it."""

import asyncio
import threading
from collections.abc import Sequence

import numpy as np
import pytest

from cairn.memindex import LocalEmbedder
from cairn.memindex.embeddings import LOCAL_DIMENSIONS, Vectors

BOUND_S = 5.0
NOT_STARTED_WITHIN_S = 0.5


class GatedEmbedder(LocalEmbedder):
    """The real scheduling around an encoder that holds each text until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.started = {text: threading.Event() for text in ("first", "second")}
        self.go = {text: threading.Event() for text in ("first", "second")}
        self._count = threading.Lock()
        self.running = self.most_at_once = 0

    def encode(self, texts: Sequence[str]) -> Vectors:
        with self._count:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        self.started[texts[0]].set()
        self.go[texts[0]].wait(BOUND_S)
        with self._count:
            self.running -= 1
        if texts[0] == "first":
            raise RuntimeError("an error nobody awaits any more")
        return np.ones((len(texts), LOCAL_DIMENSIONS), dtype=np.float32)


async def test_a_cancelled_callers_encoding_keeps_the_turn_until_its_thread_ends() -> None:
    embedder = GatedEmbedder()
    first = asyncio.create_task(embedder.embed(["first"]))
    assert await asyncio.to_thread(embedder.started["first"].wait, BOUND_S)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first  # the caller is released at once, its thread still encoding
    second = asyncio.create_task(embedder.embed(["second"]))
    assert not await asyncio.to_thread(embedder.started["second"].wait, NOT_STARTED_WITHIN_S), (
        "the next encoding started while the cancelled one's thread was still running"
    )
    embedder.go["first"].set()
    assert await asyncio.to_thread(embedder.started["second"].wait, BOUND_S)
    embedder.go["second"].set()
    assert (await asyncio.wait_for(second, BOUND_S)).shape == (1, LOCAL_DIMENSIONS)
    assert embedder.most_at_once == 1


async def test_an_error_of_an_awaited_encoding_is_raised_to_its_caller() -> None:
    embedder = GatedEmbedder()
    embedder.go["first"].set()
    with pytest.raises(RuntimeError, match="nobody awaits"):
        await embedder.embed(["first"])
    embedder.go["second"].set()
    assert (await embedder.embed(["second"])).shape == (1, LOCAL_DIMENSIONS), "the turn was given back"
