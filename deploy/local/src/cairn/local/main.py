"""`cairn-local up|down|run|status`: the embedded stack behind `make up`, `make down` and `make run`."""

import argparse
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from cairn.local.processes import is_running
from cairn.local.stack import SERVICES, LocalStack


def _print_endpoints(stack: LocalStack) -> None:
    print(f"cairn is up (data in {stack.home}):")
    print(f"  ingest (writes)  {stack.url('ingest')}")
    print(f"  recall (reads)   {stack.url('recall')}")
    for service in ("session", "indexer", "consolidation"):
        print(f"  {service:<16} {stack.url(service)}/readyz")
    print(f"  endpoints + demo API key: {stack.home / 'endpoints.env'}")


def _run_foreground(stack: LocalStack) -> int:
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
    try:
        stack.up()
        _print_endpoints(stack)
        print("Ctrl-C stops everything.")
        while not stopping:
            dead = [s for s in SERVICES if not is_running(stack.state.pids.get(s))]
            if dead:
                print(f"service(s) exited: {', '.join(dead)}; see {stack.home / 'logs'}", file=sys.stderr)
                return 1
            time.sleep(0.5)
        return 0
    finally:
        # A second Ctrl-C (or the terminal closing) must not cut the shutdown short and strand servers.
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        print("stopping…", flush=True)
        stack.down()
        print("stopped", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="cairn-local", description=__doc__)
    parser.add_argument("command", choices=["up", "down", "run", "status"])
    parser.add_argument("--home", type=Path, default=Path(".cairn"), help="data folder (default .cairn)")
    parser.add_argument(
        "--postgres-over",
        choices=["unix", "tcp"],
        default="unix",
        help="how the services reach Postgres: its Unix-domain socket (default) or TCP on 127.0.0.1",
    )
    args = parser.parse_args()
    stack = LocalStack(args.home, postgres_over=args.postgres_over)
    if args.command == "up":
        try:
            stack.up()
        except BaseException:
            print(f"start-up failed; logs are in {stack.home / 'logs'}", file=sys.stderr)
            raise
        _print_endpoints(stack)
    elif args.command == "down":
        stack.down()
        print("cairn stopped")
    elif args.command == "run":
        sys.exit(_run_foreground(stack))
    else:
        for name, pid in sorted(stack.state.pids.items()):
            print(f"{name:<14} pid {pid:<8} {'running' if is_running(pid) else 'stopped'}")
