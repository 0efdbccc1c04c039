"""A real OpenAI-compatible `POST /v1/chat/completions` server for tests, in a thread of the test process: what
cairn's model client meets in production, with answers a test scripts, and a record of what it was sent.

    with ModelServer() as server:
        server.script(CallTools(("memory_search", {"query": "flight"})), Reply("NONE"))
        client = ModelClient(server.url, "test-model")
        ...
        server.requests[0].tools, server.disconnects

Each request takes the next step of the script; once the steps are used up, `then` answers every later request
(`script(then=CallTools(...))`: a model that never stops calling tools), else a 500 says the script ran out.
`Hang()` holds the request, answering nothing, until the client closes the connection, and counts that in
`disconnects`: the proof that cancelling a call aborted it. Every wait here is bounded.
"""

import json
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HANG_LIMIT_S = 60.0  # a hang ends by itself after this, so a broken test cannot hold the server for ever
MODEL = "test-model"


@dataclass(frozen=True)
class Reply:
    """A plain answer."""

    content: str | None
    prompt_tokens: int = 11
    completion_tokens: int = 7
    finish_reason: str = "stop"
    model: str | None = None  # None: the model the request named


@dataclass(frozen=True, init=False)
class CallTools:
    """An answer that calls tools: each call is (name, arguments), arguments a dict (sent as its JSON string,
    as OpenAI does) or a str sent as it is (malformed JSON, for instance)."""

    calls: tuple[tuple[str, dict[str, Any] | str], ...]
    content: str | None
    prompt_tokens: int
    completion_tokens: int

    def __init__(
        self,
        *calls: tuple[str, dict[str, Any] | str],
        content: str | None = None,
        prompt_tokens: int = 20,
        completion_tokens: int = 5,
    ) -> None:
        object.__setattr__(self, "calls", calls)
        object.__setattr__(self, "content", content)
        object.__setattr__(self, "prompt_tokens", prompt_tokens)
        object.__setattr__(self, "completion_tokens", completion_tokens)


@dataclass(frozen=True)
class Hang:
    """No answer: the request is held until the client disconnects."""


@dataclass(frozen=True)
class Status:
    """An HTTP error status with an OpenAI-style error body."""

    status: int
    message: str = "scripted failure"


@dataclass(frozen=True)
class Raw:
    """Exactly these bytes as the body; `declare_length=False` sends no Content-Length and ends the body by
    closing the connection, so the client learns the size only while reading."""

    body: bytes
    status: int = 200
    declare_length: bool = True


Step = Reply | CallTools | Hang | Status | Raw


@dataclass(frozen=True)
class Received:
    path: str
    body: dict[str, Any]
    authorization: str | None

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.body.get("messages", [])
        return messages

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        tools: list[dict[str, Any]] | None = self.body.get("tools")
        return tools

    @property
    def model(self) -> str | None:
        model: str | None = self.body.get("model")
        return model


@dataclass
class _Script:
    steps: list[Step] = field(default_factory=list)
    then: Step | None = None

    def next(self) -> Step:
        if self.steps:
            return self.steps.pop(0)
        return self.then if self.then is not None else Status(500, "the test's script has no more steps")


def completion(step: Reply | CallTools, asked_model: str, serial: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": step.content}
    if isinstance(step, CallTools):
        message["tool_calls"] = [
            {
                "id": f"call_{serial}_{index}",
                "type": "function",
                "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
            for index, (name, args) in enumerate(step.calls)
        ]
    finish = "tool_calls" if isinstance(step, CallTools) else step.finish_reason
    model = step.model if isinstance(step, Reply) and step.model else asked_model
    return {
        "id": f"chatcmpl-{serial}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": step.prompt_tokens,
            "completion_tokens": step.completion_tokens,
            "total_tokens": step.prompt_tokens + step.completion_tokens,
        },
    }


class ModelServer:
    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.disconnects = 0
        self._script = _Script()
        self._changed = threading.Condition()
        self._closing = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        """The API's base URL, ending in /v1 (the client appends /chat/completions)."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> "ModelServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def script(self, *steps: Step, then: Step | None = None) -> None:
        """Replaces what the next requests get."""
        with self._changed:
            self._script = _Script(list(steps), then)

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: len(self.requests) >= count, timeout)

    def wait_for_disconnects(self, count: int, timeout: float = 10.0) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self.disconnects >= count, timeout)

    # -- serving ------------------------------------------------------------------------------------------
    def _received(self, received: Received) -> Step:
        with self._changed:
            self.requests.append(received)
            step = self._script.next()
            self._changed.notify_all()
            return step

    def _disconnected(self) -> None:
        with self._changed:
            self.disconnects += 1
            self._changed.notify_all()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (_Handler,), {"server_of_test": self})


class _Handler(BaseHTTPRequestHandler):
    server_of_test: "ModelServer"  # set on the subclass each ModelServer makes

    protocol_version = "HTTP/1.1"  # keep-alive, as real servers: the client must not reuse a broken one

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        step = self.server_of_test._received(Received(self.path, body, self.headers.get("Authorization")))
        if self.path != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
        elif isinstance(step, Hang):
            self._hang()
        elif isinstance(step, Status):
            self._send(step.status, {"error": {"message": step.message, "type": "server_error"}})
        elif isinstance(step, Raw):
            self._send_raw(step)
        else:
            self._send(200, completion(step, str(body.get("model")), len(self.server_of_test.requests)))

    def _hang(self) -> None:
        """Waits until the client closes its side (the socket reads as end of file)."""
        deadline = time.monotonic() + HANG_LIMIT_S
        while time.monotonic() < deadline and not self.server_of_test._closing.is_set():
            readable, _, _ = select.select([self.connection], [], [], 0.05)
            if not readable:
                continue
            try:
                peeked = self.connection.recv(1, socket.MSG_PEEK)
            except OSError:  # reset by the peer: gone as well
                peeked = b""
            if peeked == b"":
                self.server_of_test._disconnected()
                self.close_connection = True
                return
            time.sleep(0.05)  # the client sent more (it should not): keep holding
        self.close_connection = True

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_raw(self, step: Raw) -> None:
        self.send_response(step.status)
        self.send_header("Content-Type", "application/json")
        if step.declare_length:
            self.send_header("Content-Length", str(len(step.body)))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        try:
            self.wfile.write(step.body)
        except OSError:  # the client stopped reading a body it found too large
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        return
