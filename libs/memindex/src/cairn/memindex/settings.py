"""Settings of the memory index, shared by the services that write it (indexer) and query it (recall):
both must embed with the same provider and model, so both read the same `CAIRN_EMBEDDING_*` variables."""

from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

Provider = Literal["local", "openai-compatible", "none"]


class EmbeddingSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_EMBEDDING_", extra="ignore")

    provider: Provider = Field(
        default="local",
        description="local: the multilingual Universal Sentence Encoder shipped in the wheel (512-d, offline); "
        "openai-compatible: POST {url}/embeddings; none: lexical search only",
    )
    url: str = Field(default="http://127.0.0.1:11434/v1", description="base URL of an OpenAI-compatible API")
    api_key: SecretStr | None = None
    model: str = Field(default="text-embedding-3-small", description="model name sent to the remote API")
    dimensions: int | None = Field(default=None, ge=8, le=4096, description="asked of the remote API when set")
    batch_size: int = Field(default=64, ge=1, le=2048)
    max_retries: int = Field(default=5, ge=0, le=20)
    timeout_s: float = Field(default=30.0, gt=0)
    backoff_s: float = Field(default=0.5, gt=0, description="first retry delay; doubles per attempt")


class MemoryIndexSettings(BaseSettings):
    """How documents and transcripts are cut, and when remembered transcripts are indexed."""

    model_config = SettingsConfigDict(env_prefix="CAIRN_MEMORY_", extra="ignore")

    chunk_tokens: int = Field(default=400, ge=32, le=4000)
    overlap_tokens: int = Field(default=80, ge=0, le=1000)
    debounce_s: float = Field(default=5.0, ge=0, le=600, description="quiet time before new turns are chunked")
    max_delay_s: float = Field(default=60.0, ge=0, description="a busy session is chunked at least this often")
    poll_s: float = Field(default=1.0, gt=0, description="how often due sessions are looked for")
    slice_turns: int = Field(
        default=256, ge=1, le=100_000, description="turns of a transcript chunked and embedded per transaction"
    )
    reembed_check_s: float = Field(
        default=30.0, gt=0, description="how often vectors of another model than the configured one are looked for"
    )
