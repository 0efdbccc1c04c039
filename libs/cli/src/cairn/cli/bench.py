"""`cairn bench ingest`: end-to-end ingest throughput of a running stack through its public API.

Creates a fresh tenant, posts N messages through `POST /v1/messages/batch`, then waits until the last
one is searchable. Prints a table and writes JSON; numbers are whole-pipeline (ingest → session →
indexer), on whatever machine the stack runs.
"""

import json
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from cairn.cli.importer import BATCH, import_file

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


@dataclass(frozen=True)
class IngestResult:
    messages: int
    batch_size: int
    accept_seconds: float
    searchable_seconds: float
    accepted_per_s: float
    searchable_per_s: float


def read_endpoints(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


def _wait_searchable(recall: httpx.Client, token: str, position: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = recall.post("/v1/sessions/search", json={"query": token, "consistent_with": position}).json()
        if found["results"]:
            return
    raise TimeoutError(f"the last message was not searchable within {timeout}s")


def _message(run: str, i: int) -> dict[str, str]:
    """Mixed English and Chinese text, each message with its own searchable token."""
    return {
        "text": f"bench message {i} 第{i}条消息 token b{run}n{i}",
        "message_id": f"{run}-{i}",
        "channel": "bench",
        "peer_id": str(i % 50),
    }


def create_tenant(endpoints: dict[str, str], name: str) -> tuple[str, str]:
    """A fresh tenant through the admin API: its id and its API key."""
    admin = {"Authorization": f"Bearer {endpoints['CAIRN_ADMIN_TOKEN']}"}
    created = httpx.post(
        f"{endpoints['CAIRN_INGEST_URL']}/v1/admin/tenants", json={"name": name}, headers=admin, timeout=30
    ).raise_for_status()
    body = created.json()
    return str(body["tenant_id"]), str(body["api_key"])


def new_tenant(endpoints: dict[str, str], name: str) -> str:
    return create_tenant(endpoints, name)[1]


def run_ingest(endpoints: dict[str, str], messages: int, batch_size: int) -> IngestResult:
    headers = {"Authorization": f"Bearer {new_tenant(endpoints, 'bench')}"}
    run = uuid.uuid4().hex[:8]
    with (
        httpx.Client(base_url=endpoints["CAIRN_INGEST_URL"], headers=headers, timeout=60) as ingest,
        httpx.Client(base_url=endpoints["CAIRN_RECALL_URL"], headers=headers, timeout=60) as recall,
    ):
        start = time.perf_counter()
        position = ""
        for first in range(0, messages, batch_size):
            batch = [
                {
                    "text": f"bench message {i} 第{i}条消息 token b{run}n{i}",
                    "message_id": f"{run}-{i}",
                    "channel": "bench",
                    "peer_id": str(i % 50),
                }
                for i in range(first, min(first + batch_size, messages))
            ]
            results = ingest.post("/v1/messages/batch", json={"messages": batch}).raise_for_status().json()["results"]
            position = results[-1]["position"]
        accepted = time.perf_counter() - start
        _wait_searchable(recall, f"b{run}n{messages - 1}", position, timeout=600)
        searchable = time.perf_counter() - start
    return IngestResult(
        messages,
        batch_size,
        round(accepted, 3),
        round(searchable, 3),
        round(messages / accepted, 1),
        round(messages / searchable, 1),
    )


def run_import(endpoints: dict[str, str], corpus: Path) -> IngestResult:
    """`cairn import` of a dataset corpus into a fresh tenant, timed until the last message is searchable."""
    key = new_tenant(endpoints, "bench-import")
    result = import_file(corpus, endpoints["CAIRN_INGEST_URL"], endpoints["CAIRN_RECALL_URL"], key)
    return IngestResult(result.messages, BATCH, result.accept_seconds, result.searchable_seconds,
                        result.accepted_per_s, result.searchable_per_s)  # fmt: skip


def report(benchmark: str, result: "DataclassInstance", out: Path) -> None:
    print(f"{'figure':<34}{'value':>12}")
    for name, value in asdict(result).items():
        print(f"{name:<34}{value:>12}")
    _write(out, {"benchmark": benchmark, **asdict(result)})


def print_rows(rows: list[dict[str, Any]]) -> None:
    """Rows as a table, a column per key any row has (blank where a row has none): the first column
    left-aligned, the others right-aligned."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    print("  ".join(f"{c:>18}" if i else f"{c:<38}" for i, c in enumerate(columns)))
    for row in rows:
        print("  ".join(f"{row.get(c, '')!s:>18}" if i else f"{row.get(c, '')!s:<38}" for i, c in enumerate(columns)))


def report_rows(benchmark: str, rows: list[dict[str, Any]], out: Path) -> None:
    print_rows(rows)
    _write(out, {"benchmark": benchmark, "rows": rows})


def report_table(benchmark: str, rows: list[tuple[str, str, str]], data: dict[str, Any], out: Path) -> None:
    """(figure, value, goal) rows as a table, and the full result as JSON."""
    width = max(len(figure) for figure, _, _ in rows) + 2
    print(f"{'figure':<{width}}{'value':>22}  goal")
    for figure, value, goal in rows:
        print(f"{figure:<{width}}{value:>22}  {goal}")
    _write(out, {"benchmark": benchmark, **data})


def _write(out: Path, data: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2))
    print(f"written {out}")


def write_json(out: Path, data: dict[str, Any]) -> None:
    _write(out, data)
