"""A small OpenAI-compatible `/v1/embeddings` server for tests, run in a thread of the test process: the
real HTTP path of the `openai-compatible` provider, with answers a test chooses (`Handler.answer`)."""

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Handler(BaseHTTPRequestHandler):
    def answer(self, body: dict[str, Any]) -> tuple[int, Any]:
        """The status and JSON payload for a request `body` (a payload of None: headers only)."""
        raise NotImplementedError

    def do_POST(self) -> None:
        status, payload = self.answer(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(status)
        if payload is None:
            self.send_header("Retry-After", "0")
            self.end_headers()
            return
        data = json.dumps(payload).encode()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextlib.contextmanager
def serving(handler: type[Handler]) -> Iterator[str]:
    """The API's base URL (ending in /v1) while the server runs."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
