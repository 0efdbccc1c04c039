"""How model-based extraction keeps its per-agent figures in Redis: the contract between its writer
(consolidation's extraction worker) and its reader (recall's memory status). One hash per agent,
`<prefix>:agent:<tenant>:<agent>`, of counters; losing it loses figures, never memory."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KEY_PREFIX = "cairn:extract"

PENDING = "pending"  # turns waiting to be extracted (debouncing, capped, or the model down)
NO_MODEL = "no_model"  # turns that could not be extracted by a model: none is configured
CALLS = "calls"
PROMPT_TOKENS = "prompt_tokens"
COMPLETION_TOKENS = "completion_tokens"
BAD_REPLIES = "bad_replies"  # answers from which nothing could be read
CANDIDATES = "candidates"
TURNS = "turns"  # turns extracted
CAPPED = "capped"  # batches deferred by the hourly cap
RETRIES = "retries"  # batches put back because the model could not be reached
FIELDS = (PENDING, NO_MODEL, CALLS, PROMPT_TOKENS, COMPLETION_TOKENS, BAD_REPLIES, CANDIDATES, TURNS, CAPPED, RETRIES)


def agent_key(tenant_id: str, agent_id: str, prefix: str = KEY_PREFIX) -> str:
    return f"{prefix}:agent:{tenant_id}:{agent_id}"


@dataclass(frozen=True)
class ExtractionFigures:
    pending: int = 0
    no_model: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    bad_replies: int = 0
    candidates: int = 0
    turns: int = 0
    capped: int = 0
    retries: int = 0

    @classmethod
    def of(cls, raw: Mapping[Any, Any]) -> "ExtractionFigures":
        """From the hash as Redis returns it; unknown or unreadable fields are left out."""
        read = {(k.decode() if isinstance(k, bytes) else str(k)): v for k, v in raw.items()}
        values: dict[str, int] = {}
        for name in FIELDS:
            value = read.get(name)
            try:
                values[name] = max(0, int(value)) if value is not None else 0
            except ValueError:
                values[name] = 0
        return cls(**values)
