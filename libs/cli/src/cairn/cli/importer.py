"""`cairn import FILE.jsonl`: import conversation history through the public batch API, with the
original times as event time, showing progress.

A line is either a message as `POST /v1/messages` takes it, or a row of the retrieval datasets'
`corpus.jsonl` (`doc_id`, `conv_id`, `session_id`, `speaker`, `timestamp`, `text`), which becomes a
message of agent `<conv_id>` in session `agent:<conv_id>:import:<session_id>`, sent by `speaker`,
with `doc_id` as its message id — so a re-import stores nothing twice.
"""

import json
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

BATCH = 500
# Half the services' default body limit (CAIRN_HTTP_MAX_BODY_BYTES, 16 MiB): 500 texts of up to 64 KiB could be
# twice that, and a request over the limit is refused whole.
BATCH_BYTES = 8 * 1024 * 1024
ENVELOPE_BYTES = 64  # `{"messages": [...]}` around them
_TOKEN = re.compile(r"[^A-Za-z0-9_-]+")
_TIME_FORMATS = ("%I:%M %p on %d %B, %Y", "%Y-%m-%d", "%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d %H:%M:%S")


def parse_time(text: str) -> datetime:
    """Dataset timestamps ("1:56 pm on 8 May, 2023", "2023-04-27") as aware datetimes; UTC when no zone."""
    for layout in _TIME_FORMATS:
        try:
            parsed = datetime.strptime(text.strip(), layout)
        except ValueError:
            continue
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    raise ValueError(f"unrecognised time {text!r}")


def token(text: str) -> str:
    return _TOKEN.sub("-", text).strip("-")[:64] or "x"


def to_message(row: dict[str, Any]) -> dict[str, Any]:
    if "doc_id" not in row:
        return row
    agent = token(row["conv_id"])
    return {
        "agent_id": agent,
        "channel": "import",
        "session_key": f"agent:{agent}:import:{token(row['session_id'])}",
        "sender_name": row.get("speaker"),
        "peer_id": row.get("speaker"),
        "role": row.get("role", "user"),
        "text": row["text"],
        "message_id": row["doc_id"],
        "occurred_at": parse_time(row["timestamp"]).isoformat(),
    }


def read_messages(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    yield to_message(json.loads(line))
                except (ValueError, KeyError) as error:
                    raise SystemExit(f"{path}:{number}: {error}") from error


@dataclass(frozen=True)
class ImportResult:
    messages: int
    rejected: int
    accept_seconds: float
    searchable_seconds: float

    @property
    def accepted_per_s(self) -> float:
        return round(self.messages / self.accept_seconds, 1) if self.accept_seconds else 0.0

    @property
    def searchable_per_s(self) -> float:
        return round(self.messages / self.searchable_seconds, 1) if self.searchable_seconds else 0.0


def batches(messages: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """The messages in order, in runs of at most BATCH messages and BATCH_BYTES of JSON (a message larger
    than that alone goes alone)."""
    batch: list[dict[str, Any]] = []
    size = 0
    for message in messages:
        encoded = len(json.dumps(message, ensure_ascii=False).encode()) + 2  # and the ", " after it
        if batch and (len(batch) == BATCH or size + encoded > BATCH_BYTES - ENVELOPE_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(message)
        size += encoded
    if batch:
        yield batch


def _progress(done: int, total: int, started: float) -> None:
    width = 30
    filled = width * done // max(total, 1)
    rate = done / max(time.perf_counter() - started, 1e-9)
    sys.stderr.write(f"\r[{'#' * filled}{' ' * (width - filled)}] {done}/{total} messages, {rate:,.0f}/s")
    sys.stderr.flush()


def _wait_indexed(recall: httpx.Client, agent: str, position: str) -> None:
    """Bounded read-your-writes waits until the index has the last accepted position."""
    for _ in range(120):
        body = recall.post("/v1/sessions/search", json={"agent_id": agent, "query": "x", "consistent_with": position})
        if not body.raise_for_status().json()["indexing"]:
            return
    raise TimeoutError("the import was not searchable within 10 minutes")


def import_file(path: Path, ingest_url: str, recall_url: str, api_key: str) -> ImportResult:
    messages = list(read_messages(path))
    headers = {"Authorization": f"Bearer {api_key}"}
    rejected, position, agent = 0, "", "main"
    with httpx.Client(base_url=ingest_url, headers=headers, timeout=120) as ingest:
        started = time.perf_counter()
        done = 0
        for batch in batches(messages):
            results = ingest.post("/v1/messages/batch", json={"messages": batch}).raise_for_status().json()["results"]
            accepted = [r for r in results if "position" in r]
            rejected += len(results) - len(accepted)
            if accepted:
                position, agent = accepted[-1]["position"], batch[-1].get("agent_id", "main")
            done += len(batch)
            _progress(done, len(messages), started)
        accept_seconds = time.perf_counter() - started
    sys.stderr.write("\n")
    with httpx.Client(base_url=recall_url, headers=headers, timeout=120) as recall:
        if position:
            _wait_indexed(recall, agent, position)
    return ImportResult(len(messages) - rejected, rejected, round(accept_seconds, 3),
                        round(time.perf_counter() - started, 3))  # fmt: skip
