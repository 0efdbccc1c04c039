"""Idle keep-alive connections outlive the clients' own idle timeouts (httpx keeps one 5 s, nginx 60 s):
when the server closed first (uvicorn's default is 5 s), a client reusing the connection at that moment
had its request fail with a read error. Shown on a raw socket: a connection idle for longer than the old
default still answers."""

import socket
import time

import pytest

from cairn.local import LocalStack

pytestmark = pytest.mark.e2e

REQUEST = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def _answer(sock: socket.socket) -> bytes:
    """One whole response (headers and body, by its Content-Length); its status line, or b"" if closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(4096)
        if not chunk:
            return b""
        body += chunk
    assert len(body) == length
    return head.split(b"\r\n")[0]


@pytest.mark.parametrize("service", ["ingest", "recall"])
def test_an_idle_connection_is_still_open_after_the_clients_idle_timeout(services: LocalStack, service: str) -> None:
    port = int(services.url(service).rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(REQUEST)
        assert _answer(sock) == b"HTTP/1.1 200 OK"
        time.sleep(6.5)  # idle past uvicorn's default 5 s keep-alive and httpx's own 5 s
        sock.sendall(REQUEST)
        assert _answer(sock) == b"HTTP/1.1 200 OK"
