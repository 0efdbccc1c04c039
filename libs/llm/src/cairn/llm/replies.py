"""What a chat-completions answer means: the OpenAI shape read into `ChatResult`, or why it is unusable."""

import json
from dataclasses import dataclass
from typing import Any


class ModelError(Exception):
    """The model answered something unusable: a 4xx, a body that is no chat completion, malformed tool arguments."""


class ModelUnavailable(ModelError):
    """The model could not be asked now (connection refused or reset, timeout, 5xx, 429): worth retrying later."""


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]  # parsed from the JSON string the model sent


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class ChatResult:
    content: str | None
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    finish_reason: str | None
    model: str  # as the server named it, else the model asked for


NO_USAGE = Usage(0, 0)
ERROR_DETAIL_CHARS = 300  # of a refusal's body, quoted in the ModelError


def status_error(status: int, body: bytes) -> ModelError:
    """A non-2xx answer: busy or broken servers are ModelUnavailable, the rest (a bad request) ModelError."""
    detail = body[:ERROR_DETAIL_CHARS].decode("utf-8", "replace").strip()
    message = f"the model server answered HTTP {status}" + (f": {detail}" if detail else "")
    if status == 429 or status >= 500:
        return ModelUnavailable(message)
    return ModelError(message)


def chat_result(body: bytes, asked_model: str) -> ChatResult:
    """Reads a 2xx body; a ModelError says what in it is unusable."""
    try:
        answer = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelError(f"the model server's answer is not JSON: {error}") from error
    if not isinstance(answer, dict):
        raise ModelError("the model server's answer is not a JSON object")
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ModelError("the model server's answer has no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise ModelError("the model server's first choice has no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise ModelError("the model's message content is not a string")
    finish_reason = choices[0].get("finish_reason")
    model = answer.get("model")
    return ChatResult(
        content=content,
        tool_calls=tool_calls(message.get("tool_calls")),
        usage=usage(answer.get("usage")),
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
        model=model if isinstance(model, str) and model else asked_model,
    )


def tool_calls(raw: Any) -> tuple[ToolCall, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ModelError("the model's tool_calls is not a list")
    return tuple(tool_call(item, index) for index, item in enumerate(raw))


def tool_call(raw: Any, index: int) -> ToolCall:
    function = raw.get("function") if isinstance(raw, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str) or not name:
        raise ModelError(f"tool call {index} names no function")
    assert isinstance(function, dict)
    # Some servers (Ollama's) leave out the id; the position keeps the tool answers matched to their calls.
    call_id = raw.get("id")
    return ToolCall(
        id=call_id if isinstance(call_id, str) and call_id else f"call_{index}",
        name=name,
        arguments=arguments(name, function.get("arguments")),
    )


def arguments(tool: str, raw: Any) -> dict[str, Any]:
    """The OpenAI shape is a JSON string; some servers send the object itself, and an empty string means none."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        raise ModelError(f"the arguments of tool {tool!r} are neither a JSON string nor an object")
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ModelError(f"the arguments of tool {tool!r} are not valid JSON: {error}") from error
    if not isinstance(parsed, dict):
        raise ModelError(f"the arguments of tool {tool!r} are not a JSON object")
    return parsed


def usage(raw: Any) -> Usage:
    """Missing or odd counts are 0: accounting must not make an otherwise good answer unusable."""
    if not isinstance(raw, dict):
        return NO_USAGE
    return Usage(_count(raw.get("prompt_tokens")), _count(raw.get("completion_tokens")))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
