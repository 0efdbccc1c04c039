"""One OpenAI-compatible chat-completions client: `POST {base_url}/chat/completions`, no streaming.

Every call is bounded three ways: in time (`timeout_s`, from connecting to the last byte), in size (an answer
past `max_response_bytes` is refused while it is read, never held whole) and by its caller: cancelling the task
that awaits `chat` closes the connection, so the model server sees the request abandoned and can stop working
on it. Redirects are not followed: a tenant's allowed host could otherwise send the call anywhere.
"""

import asyncio
import json
from typing import Any

import httpx

from cairn.llm.replies import ChatResult, ModelError, ModelUnavailable, chat_result, status_error

MAX_RESPONSE_BYTES = 4 * 1024 * 1024  # a chat answer is kilobytes; more is a broken or hostile server


class ModelClient:
    """One per (base_url, model, api_key): its connection pool is shared by all calls with that configuration."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 30.0,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self.max_response_bytes = max_response_bytes
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(
            headers=headers, timeout=httpx.Timeout(timeout_s), follow_redirects=False, trust_env=False
        )

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = 0.0,
    ) -> ChatResult:
        """One completion. `tools` are in OpenAI's function format ({"type": "function", "function": {...}}).
        Raises ModelUnavailable (retryable) or ModelError (the answer is unusable)."""
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            body["tools"] = tools
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if temperature is not None:
            body["temperature"] = temperature
        try:
            async with asyncio.timeout(self.timeout_s):
                status, answer = await self._post(json.dumps(body, ensure_ascii=False).encode())
        except (TimeoutError, httpx.TimeoutException) as error:
            raise ModelUnavailable(f"the model server did not answer within {self.timeout_s:g} s") from error
        except httpx.TransportError as error:
            raise ModelUnavailable(f"the model server cannot be reached: {error!r}") from error
        except httpx.DecodingError as error:
            raise ModelError(f"the model server's answer cannot be decoded: {error}") from error
        if not 200 <= status < 300:
            raise status_error(status, answer)
        return chat_result(answer, self.model)

    async def _post(self, body: bytes) -> tuple[int, bytes]:
        request = self._http.build_request(
            "POST", f"{self.base_url}/chat/completions", content=body, headers={"Content-Type": "application/json"}
        )
        # Streamed, so the size bound holds while reading; leaving the block early (too large, cancelled,
        # timed out) closes the connection instead of returning it to the pool half read.
        response = await self._http.send(request, stream=True)
        try:
            declared = response.headers.get("Content-Length")
            if declared is not None and declared.isdigit() and int(declared) > self.max_response_bytes:
                raise ModelError(self._too_large())
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > self.max_response_bytes:
                    raise ModelError(self._too_large())
                chunks.append(chunk)
            return response.status_code, b"".join(chunks)
        finally:
            await response.aclose()

    def _too_large(self) -> str:
        return f"the model server's answer is larger than {self.max_response_bytes} bytes"

    async def aclose(self) -> None:
        await self._http.aclose()

    def __repr__(self) -> str:  # never the key
        return f"ModelClient({self.base_url!r}, {self.model!r})"
