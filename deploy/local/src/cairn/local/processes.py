"""Starting and stopping child processes by recorded PID, and waiting on ports and URLs."""

import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # as the servers do: a port just released by our own last run (TIME_WAIT) counts as free
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


# Children started by this process, kept so they are reaped (and Python does not warn about them).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def spawn(argv: Sequence[str], log_file: Path, env: Mapping[str, str] | None = None) -> int:
    """Start a detached process (own session, so Ctrl-C in a terminal reaches only us) logging to a file."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as log:
        proc = subprocess.Popen(
            list(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
    _CHILDREN[proc.pid] = proc
    return proc.pid


def is_running(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    child = _CHILDREN.get(pid)
    if child is not None:  # a zombie child still answers kill(0): ask Popen, which reaps it
        if child.poll() is None:
            return True
        del _CHILDREN[pid]
        return False
    return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def stop_pid(pid: int | None, timeout: float = 10.0) -> None:
    """SIGTERM, wait, then SIGKILL: only ever the PID we recorded."""
    if not is_running(pid):
        return
    assert pid is not None
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_running(pid):
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


def stop_all(pids: list[int | None], timeout: float = 15.0) -> None:
    """SIGTERM all at once (they shut down in parallel), then SIGKILL whatever is left."""
    running = [pid for pid in pids if pid is not None and is_running(pid)]
    for pid in running:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(is_running(pid) for pid in running):
        time.sleep(0.05)
    for pid in running:
        stop_pid(pid, timeout=0)


def wait_for_port(port: int, timeout: float, pid: int | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pid is not None and not is_running(pid):
            raise RuntimeError(f"process {pid} exited before listening on port {port}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listened on 127.0.0.1:{port} within {timeout}s")


def wait_for_ready(url: str, timeout: float, pid: int | None = None, log_file: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if pid is not None and not is_running(pid):
            tail = log_file.read_text(errors="replace")[-3000:] if log_file and log_file.exists() else ""
            raise RuntimeError(f"process {pid} exited while starting ({url}):\n{tail}")
        try:
            response = httpx.get(url, timeout=2.0)
            if response.status_code == 200:
                return
            last = f"{response.status_code} {response.text[:200]}"
        except httpx.HTTPError as error:
            last = str(error)
        time.sleep(0.1)
    raise TimeoutError(f"{url} not ready within {timeout}s: {last}")
