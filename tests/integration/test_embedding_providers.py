"""Embedding providers for real: the local model loaded from the installed wheel (offline), and the
OpenAI-compatible client against a small HTTP server of this test that fails before it answers."""

import asyncio
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pytest
from pydantic import SecretStr

from cairn.memindex import EmbeddingSettings, LocalEmbedder, OpenAICompatibleEmbedder
from cairn.memindex.embeddings import LOCAL_DIMENSIONS, LOCAL_SLICE, RemoteEmbeddingError
from tests.embedding_api import Handler, serving

DISTRACTORS = [
    "今天天气很好，我们去公园散步",
    "他每天早上跑步五公里",
    "I went to the park with my dog",
    "She is learning to play the piano",
    "The meeting was moved to Thursday afternoon",
]


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    embedder = LocalEmbedder()
    embedder.load()
    return embedder


def _best(embedder: LocalEmbedder, query: str, documents: list[str]) -> str:
    vectors = embedder.encode([query, *documents])
    return documents[int(np.argmax(vectors[1:] @ vectors[0]))]


@pytest.mark.parametrize(
    ("query", "meant"),
    [
        ("用户不喜欢吃辣", "他忌口，不吃辣椒"),
        ("allergic to peanuts", "peanuts make me sick"),
        ("what pet does she have", "她养了一只小猫"),
    ],
)
async def test_the_local_model_finds_meaning_not_shared_words(local: LocalEmbedder, query: str, meant: str) -> None:
    assert _best(local, query, [*DISTRACTORS, meant]) == meant


async def test_local_vectors_are_512_unit_floats_with_the_model_id(local: LocalEmbedder) -> None:
    vectors = await local.embed(["one", "两个", ""])
    assert vectors.shape == (3, 512)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert local.model is not None
    assert local.model.startswith("use-multilingual-v3@")
    assert local.dimensions == 512


async def test_a_short_embedding_waits_for_one_slice_of_a_long_one_not_all_of_it() -> None:
    """A document edit's few chunks must not queue behind the whole of a long transcript being embedded."""
    local = LocalEmbedder()  # its own: the lock it contends binds to this test's event loop
    local.load()
    long_texts = [f"turn {i} of a long imported conversation about trains and weather" for i in range(8 * LOCAL_SLICE)]
    long = asyncio.create_task(local.embed(long_texts))
    await asyncio.sleep(0)  # the long one holds the encoder first
    short = await local.embed(["the meeting moved to Thursday"])
    assert not long.done(), "the short call was served between the long call's slices"
    vectors = await long
    assert vectors.shape == (len(long_texts), LOCAL_DIMENSIONS)
    assert np.allclose(vectors, local.encode(long_texts), atol=1e-5), "slicing changes no vector"
    assert np.allclose(short[0], local.encode(["the meeting moved to Thursday"])[0], atol=1e-5)


def test_the_local_model_is_read_from_the_wheel_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading must not open a socket: any attempt fails the test."""
    import socket

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the local embedding model tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    fresh = LocalEmbedder()
    fresh.load()
    assert fresh.encode(["offline"]).shape == (1, 512)


class _Api(Handler):
    """`/v1/embeddings` that answers 429 and then 503 before it gives vectors (one per input)."""

    failures: ClassVar[list[int]] = []
    requests: ClassVar[list[dict[str, Any]]] = []

    def answer(self, body: dict[str, Any]) -> tuple[int, Any]:
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        if type(self).failures:
            return type(self).failures.pop(0), None
        data = [{"index": i, "embedding": [float(len(text)), 1.0, 0.0, 2.0]} for i, text in enumerate(body["input"])]
        return 200, {"data": list(reversed(data)), "model": body["model"]}


@pytest.fixture
def api() -> Iterator[str]:
    _Api.failures, _Api.requests = [], []
    with serving(_Api) as url:
        yield url


def _settings(url: str, **overrides: Any) -> EmbeddingSettings:
    return EmbeddingSettings(
        provider="openai-compatible", url=url, model="tiny-embed", api_key=SecretStr("k-test"), batch_size=2,
        backoff_s=0.01, **overrides,
    )  # fmt: skip


async def test_openai_compatible_batches_retries_429_and_5xx_and_keeps_input_order(api: str) -> None:
    _Api.failures = [429, 503]
    embedder = OpenAICompatibleEmbedder(_settings(api))
    try:
        vectors = await embedder.embed(["a", "bbb", "cc", "dddd", "e"])
    finally:
        await embedder.aclose()
    assert vectors.shape == (5, 4)
    expected = np.array([[n, 1.0, 0.0, 2.0] for n in (1, 3, 2, 4, 1)], dtype=np.float32)
    assert np.allclose(vectors, expected / np.linalg.norm(expected, axis=1, keepdims=True))
    assert [r["input"] for r in _Api.requests] == [["a", "bbb"]] * 3 + [["cc", "dddd"], ["e"]]
    assert {r["path"] for r in _Api.requests} == {"/v1/embeddings"}
    assert {r["auth"] for r in _Api.requests} == {"Bearer k-test"}
    assert {r["model"] for r in _Api.requests} == {"tiny-embed"}
    assert embedder.dimensions == 4


async def test_openai_compatible_gives_up_after_its_retries_and_says_why(api: str) -> None:
    _Api.failures = [500, 500, 500]
    embedder = OpenAICompatibleEmbedder(_settings(api, max_retries=2))
    try:
        with pytest.raises(RemoteEmbeddingError, match="500"):
            await embedder.embed(["x"])
    finally:
        await embedder.aclose()
    assert len(_Api.requests) == 3


async def test_openai_compatible_does_not_retry_a_client_error(api: str) -> None:
    _Api.failures = [400]
    embedder = OpenAICompatibleEmbedder(_settings(api))
    try:
        with pytest.raises(RemoteEmbeddingError, match="400"):
            await embedder.embed(["x"])
    finally:
        await embedder.aclose()
    assert len(_Api.requests) == 1
