"""`cairn-local up|down|run|status|chaos`: the embedded stack behind `make up`, `make down`, `make run` and
`make chaos`."""

import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from types import FrameType

from cairn.local.chaos import FAULTS, ChaosPlan, chaos_stack, print_table, run_chaos
from cairn.local.processes import is_running
from cairn.local.stack import SERVICES, LocalStack

# What `make up`/`make run` set for the services when the operator's environment does not: a model server on this
# machine (Ollama, a bench's stand-in) may be a tenant's model override. Local only: compose and Kubernetes leave
# the allow-list empty (no overrides) unless the operator sets it.
LOCAL_DEFAULTS = {"CAIRN_LLM_ALLOWED_HOSTS": "127.0.0.1,localhost"}


def local_defaults(environ: Mapping[str, str]) -> dict[str, str]:
    """The local defaults of the variables `environ` does not set (set to anything, empty included, it wins)."""
    return {name: value for name, value in LOCAL_DEFAULTS.items() if name not in environ}


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


def _chaos(args: argparse.Namespace) -> int:
    """Run the fault suite on a stack of its own; exit 1 when an acknowledged write was lost or duplicated or
    any request was answered 500."""
    home = args.home or Path(tempfile.mkdtemp(prefix="cairn-chaos-"))
    plan = ChaosPlan(faults=tuple(f for f in args.faults.split(",") if f), outage_s=args.outage_s)
    unknown = set(plan.faults) - set(FAULTS)
    if unknown:
        sys.exit(f"unknown faults {sorted(unknown)}; choose from {', '.join(FAULTS)}")
    stack = chaos_stack(home)
    try:
        rows = asyncio.run(run_chaos(stack, stack.state.api_key, plan))
    finally:
        stack.down()
        if args.home is None:
            shutil.rmtree(home, ignore_errors=True)
            shutil.rmtree(stack.postgres.base, ignore_errors=True)
    print_table(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"benchmark": "chaos", "plan": asdict(plan), "rows": [asdict(r) for r in rows]}))
    print(f"written {args.out}")
    broken = [r for r in rows if r.found != r.acknowledged or r.errors_500]
    return 1 if broken else 0


def main() -> None:
    parser = argparse.ArgumentParser(prog="cairn-local", description=__doc__)
    parser.add_argument("command", choices=["up", "down", "run", "status", "chaos"])
    parser.add_argument("--home", type=Path, help="data folder (default .cairn; chaos: a fresh temporary one)")
    parser.add_argument(
        "--postgres-over",
        choices=["unix", "tcp"],
        default="unix",
        help="how the services reach Postgres: its Unix-domain socket (default) or TCP on 127.0.0.1",
    )
    parser.add_argument("--faults", default=",".join(FAULTS), help="chaos: the parts to kill, in order")
    parser.add_argument("--outage-s", type=float, default=30.0, help="chaos: how long Postgres and NATS stay down")
    parser.add_argument("--out", type=Path, default=Path("bench-results/chaos.json"), help="chaos: the JSON result")
    args = parser.parse_args()
    if args.command == "chaos":
        sys.exit(_chaos(args))
    stack = LocalStack(
        args.home or Path(".cairn"), postgres_over=args.postgres_over, extra_env=local_defaults(os.environ)
    )
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
