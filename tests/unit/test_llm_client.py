"""The model client against a real HTTP server speaking the chat-completions protocol (tests/model_api.py):
what it sends, how it reads answers and tool calls, which failures are retryable, and that cancelling a call
aborts the request on the wire."""

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from cairn.llm import ChatResult, ModelClient, ModelError, ModelUnavailable, ToolCall, Usage
from tests.model_api import CallTools, Hang, ModelServer, Raw, Reply, Status

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "memory_search",
        "description": "search the agent's memory",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}
ASK = [{"role": "user", "content": "我下周有什么安排？"}]


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


@pytest.fixture
async def client(server: ModelServer) -> AsyncIterator[ModelClient]:
    model = ModelClient(server.url, "test-model", "sk-test", timeout_s=10)
    yield model
    await model.aclose()


async def test_a_reply_is_read_with_its_usage_and_the_request_is_openai_shaped(
    server: ModelServer, client: ModelClient
) -> None:
    server.script(Reply("周二去上海参加产品发布会。", prompt_tokens=31, completion_tokens=9))
    result = await client.chat(ASK, max_tokens=100)
    assert result == ChatResult("周二去上海参加产品发布会。", (), Usage(31, 9), "stop", "test-model")
    (sent,) = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.authorization == "Bearer sk-test"
    assert sent.model == "test-model"
    assert sent.messages == ASK
    assert sent.body["max_tokens"] == 100
    assert sent.body["temperature"] == 0.0
    assert "tools" not in sent.body


async def test_no_key_sends_no_authorization(server: ModelServer) -> None:
    server.script(Reply("ok"))
    keyless = ModelClient(server.url + "/", "m")
    try:
        assert (await keyless.chat(ASK, temperature=None)).content == "ok"
    finally:
        await keyless.aclose()
    assert server.requests[0].authorization is None
    assert "temperature" not in server.requests[0].body


async def test_tool_calls_then_a_reply(server: ModelServer, client: ModelClient) -> None:
    server.script(
        CallTools(("memory_search", {"query": "下周 安排"}), ("memory_get", {"path": "MEMORY.md", "from": 3})),
        Reply("Shanghai on Tuesday."),
    )
    first = await client.chat(ASK, tools=[SEARCH_TOOL])
    assert first.finish_reason == "tool_calls"
    assert first.content is None
    assert first.tool_calls == (
        ToolCall("call_1_0", "memory_search", {"query": "下周 安排"}),
        ToolCall("call_1_1", "memory_get", {"path": "MEMORY.md", "from": 3}),
    )
    follow_up: list[dict[str, Any]] = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1_0", "type": "function"}]},
        {"role": "tool", "tool_call_id": "call_1_0", "content": "- 下周二我去上海参加产品发布会"},
    ]
    second = await client.chat(follow_up, tools=[SEARCH_TOOL])
    assert second.content == "Shanghai on Tuesday."
    assert second.tool_calls == ()
    assert [r.tools for r in server.requests] == [[SEARCH_TOOL], [SEARCH_TOOL]]
    assert server.requests[1].messages == follow_up


async def test_a_model_that_never_stops_calling_tools_answers_every_round(
    server: ModelServer, client: ModelClient
) -> None:
    server.script(then=CallTools(("memory_search", {"query": "again"})))
    for _ in range(6):
        result = await client.chat(ASK, tools=[SEARCH_TOOL])
        assert [call.name for call in result.tool_calls] == ["memory_search"]
    assert len(server.requests) == 6


async def test_malformed_tool_arguments_are_a_model_error_naming_the_tool(
    server: ModelServer, client: ModelClient
) -> None:
    server.script(CallTools(("memory_get", '{"path": "MEMORY.md"')))
    with pytest.raises(ModelError, match="memory_get") as raised:
        await client.chat(ASK, tools=[SEARCH_TOOL])
    assert not isinstance(raised.value, ModelUnavailable)


async def test_arguments_that_are_json_but_no_object_are_refused(server: ModelServer, client: ModelClient) -> None:
    server.script(CallTools(("memory_search", '["a", "list"]')))
    with pytest.raises(ModelError, match=r"memory_search.*not a JSON object"):
        await client.chat(ASK)


@pytest.mark.parametrize("status", [500, 502, 503, 429])
async def test_busy_or_broken_servers_are_unavailable(server: ModelServer, client: ModelClient, status: int) -> None:
    server.script(Status(status, "overloaded"))
    with pytest.raises(ModelUnavailable, match=f"HTTP {status}.*overloaded"):
        await client.chat(ASK)


@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_refusals_are_model_errors_not_retryable(server: ModelServer, client: ModelClient, status: int) -> None:
    server.script(Status(status, "bad request"))
    with pytest.raises(ModelError, match=f"HTTP {status}") as raised:
        await client.chat(ASK)
    assert not isinstance(raised.value, ModelUnavailable)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"<html>gateway</html>", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"choices": []}', "no choices"),
        (b'{"choices": [{"index": 0}]}', "no message"),
        (b'{"choices": [{"message": {"content": 5}}]}', "not a string"),
        (b'{"choices": [{"message": {"tool_calls": [{"function": {}}]}}]}', "names no function"),
    ],
)
async def test_unusable_answers_are_model_errors(
    server: ModelServer, client: ModelClient, body: bytes, reason: str
) -> None:
    server.script(Raw(body))
    with pytest.raises(ModelError, match=reason) as raised:
        await client.chat(ASK)
    assert not isinstance(raised.value, ModelUnavailable)


async def test_missing_usage_and_ids_are_filled_in(server: ModelServer, client: ModelClient) -> None:
    answer = {
        "choices": [
            {"message": {"content": None, "tool_calls": [{"function": {"name": "memory_search", "arguments": {}}}]}}
        ]
    }
    server.script(Raw(json.dumps(answer).encode()))
    result = await client.chat(ASK)
    assert result.usage == Usage(0, 0)
    assert result.tool_calls == (ToolCall("call_0", "memory_search", {}),)
    assert result.model == "test-model"
    assert result.finish_reason is None


@pytest.mark.parametrize("declare_length", [True, False])
async def test_an_answer_past_the_size_bound_is_refused(server: ModelServer, declare_length: bool) -> None:
    huge = json.dumps({"choices": [{"message": {"content": "x" * 50_000}}]}).encode()
    server.script(Raw(huge, declare_length=declare_length), Reply("small"))
    bounded = ModelClient(server.url, "m", max_response_bytes=10_000)
    try:
        with pytest.raises(ModelError, match="larger than 10000 bytes"):
            await bounded.chat(ASK)
        assert (await bounded.chat(ASK)).content == "small"  # the connection it left is not reused half read
    finally:
        await bounded.aclose()


async def test_a_refused_connection_is_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    nobody = ModelClient(f"http://127.0.0.1:{port}/v1", "m")
    try:
        with pytest.raises(ModelUnavailable, match="cannot be reached"):
            await nobody.chat(ASK)
    finally:
        await nobody.aclose()


async def test_cancelling_the_call_aborts_the_request(server: ModelServer, client: ModelClient) -> None:
    server.script(Hang(), Reply("after"))
    call = asyncio.create_task(client.chat(ASK))
    assert await asyncio.to_thread(server.wait_for_requests, 1)
    assert server.disconnects == 0  # held, not abandoned yet
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert await asyncio.to_thread(server.wait_for_disconnects, 1), "the server never saw the client go"
    assert (await client.chat(ASK)).content == "after"  # the client still works, on a fresh connection


async def test_a_hanging_model_times_out_as_unavailable_and_is_disconnected(server: ModelServer) -> None:
    server.script(Hang())
    impatient = ModelClient(server.url, "m", timeout_s=0.3)
    try:
        with pytest.raises(ModelUnavailable, match=r"within 0\.3 s"):
            await impatient.chat(ASK)
    finally:
        await impatient.aclose()
    assert await asyncio.to_thread(server.wait_for_disconnects, 1)


def test_the_key_is_not_in_the_repr() -> None:
    assert "sk-secret" not in repr(ModelClient("http://127.0.0.1:1/v1", "m", "sk-secret"))
