"""Pure session rules: token estimates, compaction thresholds, the tail a reset hands to snapshots."""

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from cairn.events import CompactionPolicy, ResetPolicy
from cairn.session.settings import CompactionSettings, threshold_for

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


def compaction_limits(
    config: CompactionSettings, context_window: int | None = None, agent: CompactionPolicy | None = None
) -> tuple[int, int]:
    """(threshold tokens, max transcript bytes): the service's settings with what the agent configured in their
    place. Worked out per message, so from the values, without copying the settings model (`model_dump` and
    `model_copy` cost more than the rest of the rule)."""
    if agent is None:
        if context_window is None:
            return config.threshold_tokens, config.max_transcript_bytes
        reserve, soft, max_bytes = config.reserve_tokens, config.soft_threshold_tokens, config.max_transcript_bytes
    else:
        reserve = config.reserve_tokens if agent.reserve_tokens is None else agent.reserve_tokens
        soft = config.soft_threshold_tokens if agent.soft_threshold_tokens is None else agent.soft_threshold_tokens
        max_bytes = config.max_transcript_bytes if agent.max_transcript_bytes is None else agent.max_transcript_bytes
    window = config.context_window if context_window is None else context_window
    return threshold_for(window, reserve, soft), max_bytes


def threshold_tokens(
    config: CompactionSettings, context_window: int | None = None, agent: CompactionPolicy | None = None
) -> int:
    """The compaction threshold for an agent's context window and thresholds; the service's where it has none."""
    return compaction_limits(config, context_window, agent)[0]


def crosses_compaction(
    window: Window, config: CompactionSettings, context_window: int | None = None, agent: CompactionPolicy | None = None
) -> bool:
    """True exactly once per cycle: when the window first reaches the token or byte limit."""
    if window.flagged:
        return False
    threshold, max_bytes = compaction_limits(config, context_window, agent)
    return window.tokens >= threshold or window.bytes >= max_bytes


def is_background(session_key: str, channel: str) -> bool:
    """Heartbeats and cron jobs talk to a session without anyone being there: they never make it fresh."""
    return session_key.startswith("cron:") or channel in ("heartbeat", "cron")


def last_daily_reset(policy: ResetPolicy, now: datetime) -> datetime:
    """The latest `at_hour` o'clock in the agent's time zone at or before `now`."""
    local = now.astimezone(ZoneInfo(policy.timezone))
    boundary = local.replace(hour=policy.at_hour, minute=0, second=0, microsecond=0)
    return boundary if boundary <= local else boundary - timedelta(days=1)


def reset_policy_for(
    default: ResetPolicy | None, by_kind: Mapping[str, ResetPolicy], chat_type: str, session_key: str
) -> ResetPolicy | None:
    """The policy a session follows: the agent's `thread` policy for a thread, else its chat type's, else
    the agent's default (None when the agent was never configured)."""
    if ":thread:" in session_key and "thread" in by_kind:
        return by_kind["thread"]
    return by_kind.get(chat_type, default)


def stale_because(
    policy: ResetPolicy | None, last_activity: datetime | None, now: datetime
) -> Literal["daily", "idle"] | None:
    """Why a session is too old to continue (its policy says start fresh), or None to continue it."""
    if policy is None or last_activity is None or policy.mode == "none":
        return None
    if policy.mode == "idle":
        return "idle" if now - last_activity >= timedelta(minutes=policy.idle_minutes) else None
    return "daily" if last_activity < last_daily_reset(policy, now) else None
