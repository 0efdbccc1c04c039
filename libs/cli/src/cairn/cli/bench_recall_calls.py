"""What every part of `cairn bench recall` shares: its settings, the recall request it sends, an agent's config."""

import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

PARTS = ("lane1", "load", "datasets", "calibrate")


@dataclass(frozen=True)
class RecallBench:
    """What `cairn bench recall` runs; the defaults keep a whole run under about ten minutes on 2 cores."""

    parts: tuple[str, ...] = PARTS
    sizes: tuple[int, ...] = (10_000, 100_000)
    queries: int = 300
    concurrency: int = 50
    load_queries: int = 600
    lane2_callers: int = 20
    lane2_timeout_ms: int = 2000
    data: tuple[Path, ...] = ()
    questions: int | None = None  # per dataset; None: all
    keep_seed: Path | None = None


def recall_body(agent: str, text: str) -> dict[str, Any]:
    """A recall from a dashboard thread of its own (never stored: `chat_type` says what it is), so no two requests
    share a result-cache entry."""
    return {"agent_id": agent, "session_key": f"agent:{agent}:dashboard:{uuid.uuid4()}", "text": text,
            "chat_type": "direct"}  # fmt: skip


def configure(ingest_url: str, api_key: str, agent: str, config: dict[str, Any]) -> None:
    headers = {"Authorization": f"Bearer {api_key}"}
    httpx.put(f"{ingest_url}/v1/agents/{agent}/config", json=config, headers=headers, timeout=30).raise_for_status()


def outcomes_text(outcomes: Counter[str]) -> str:
    return ", ".join(f"{name} {count}" for name, count in sorted(outcomes.items()))
