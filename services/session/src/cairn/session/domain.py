"""Pure session rules: token estimates, compaction thresholds, the tail a reset hands to snapshots."""

import math
import re
from dataclasses import dataclass

from cairn.session.settings import CompactionSettings

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def estimate_tokens(text: str) -> int:
    """About four characters a token for alphabetic text and one a token for CJK characters."""
    cjk = len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


@dataclass(frozen=True)
class Window:
    """The live history window of a session, as far as compaction cares."""

    tokens: int
    bytes: int
    flagged: bool  # compaction-imminent already sent in this cycle


def threshold_tokens(config: CompactionSettings, context_window: int | None = None) -> int:
    """The compaction threshold for an agent's context window; the service's window when it has none."""
    if context_window is None:
        return config.threshold_tokens
    return config.model_copy(update={"context_window": context_window}).threshold_tokens


def crosses_compaction(window: Window, config: CompactionSettings, context_window: int | None = None) -> bool:
    """True exactly once per cycle: when the window first reaches the token or byte limit."""
    if window.flagged:
        return False
    return window.tokens >= threshold_tokens(config, context_window) or window.bytes >= config.max_transcript_bytes
