"""Pure session rules: token estimates for Latin and CJK text, the compaction threshold, and when the
compaction-imminent event fires."""

import math

import pytest

from cairn.events import CompactionPolicy
from cairn.session.domain import Window, compaction_limits, crosses_compaction, estimate_tokens, threshold_tokens
from cairn.session.settings import CompactionSettings


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("abcd", 1),
        ("abcde", 2),
        ("We are running the quarterly planning on Thursday", 13),
        ("上海", 2),
        ("下周二我去上海参加产品发布会", 14),
        ("来週東京に行きます", 9),
        ("カタカナ", 4),
        ("서울", 2),
        ("다음주에 서울에 갑니다", 10 + 1),  # ten syllables, two spaces round up to one token
        ("我用Python写ERR_CONN_RESET处理", 5 + math.ceil(20 / 4)),
        ("Tokyo 東京", 2 + math.ceil(6 / 4)),
    ],
    ids=[
        "empty",
        "four-chars",
        "five-chars-round-up",
        "english-sentence",
        "chinese-fragment",
        "chinese-sentence",
        "japanese",
        "katakana",
        "korean-word",
        "korean-sentence",
        "mixed-chinese-identifier",
        "mixed-latin-first",
    ],
)
def test_estimate_tokens(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


def test_english_is_about_four_characters_a_token() -> None:
    text = "the quick brown fox jumps over the lazy dog " * 100
    assert estimate_tokens(text) == len(text) / 4


def test_cjk_is_one_token_a_character_however_long() -> None:
    assert estimate_tokens("发布会" * 1000) == 3000


def _settings(**fields: int) -> CompactionSettings:
    return CompactionSettings.model_validate(fields)


def test_default_threshold_is_window_minus_reserve_minus_soft_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CONTEXT_WINDOW", "RESERVE_TOKENS", "SOFT_THRESHOLD_TOKENS", "MAX_TRANSCRIPT_BYTES"):
        monkeypatch.delenv(f"CAIRN_SESSION_{name}", raising=False)
    defaults = CompactionSettings()
    assert defaults.threshold_tokens == 200_000 - 20_000 - 4_000 == 176_000
    assert defaults.max_transcript_bytes == 2 * 1024 * 1024


@pytest.mark.parametrize(
    ("window", "threshold"),
    [
        (200_000, 176_000),
        (128_000, 104_000),
        (32_000, 8_000),
        (26_666, 2_666),  # where the two rules meet
        (26_000, 2_600),
        (24_000, 2_400),
        (2_000, 200),
        (1_000, 100),
    ],
)
def test_threshold_tokens_never_below_a_tenth_of_the_window(window: int, threshold: int) -> None:
    assert _settings(context_window=window).threshold_tokens == threshold


def test_threshold_follows_reserve_and_soft_threshold() -> None:
    assert _settings(context_window=100_000, reserve_tokens=10_000, soft_threshold_tokens=0).threshold_tokens == 90_000


CONFIG = CompactionSettings.model_validate(
    {"context_window": 200_000, "reserve_tokens": 20_000, "soft_threshold_tokens": 4_000, "max_transcript_bytes": 4096}
)


@pytest.mark.parametrize(
    ("window", "fires"),
    [
        (Window(tokens=0, bytes=0, flagged=False), False),
        (Window(tokens=175_999, bytes=4095, flagged=False), False),
        (Window(tokens=176_000, bytes=0, flagged=False), True),
        (Window(tokens=500_000, bytes=0, flagged=False), True),
        (Window(tokens=10, bytes=4096, flagged=False), True),
        (Window(tokens=10, bytes=10_000_000, flagged=False), True),
        (Window(tokens=176_000, bytes=4096, flagged=True), False),
        (Window(tokens=500_000, bytes=10_000_000, flagged=True), False),
    ],
    ids=[
        "empty",
        "just-below-both",
        "tokens-reach-threshold",
        "tokens-far-over",
        "bytes-reach-limit",
        "bytes-far-over",
        "already-flagged-at-limits",
        "already-flagged-far-over",
    ],
)
def test_crosses_compaction(window: Window, fires: bool) -> None:
    assert crosses_compaction(window, CONFIG) is fires


def _copied_limits(
    config: CompactionSettings, context_window: int | None, agent: CompactionPolicy | None
) -> tuple[int, int]:
    """The rule as it was written before: the settings copied with what the agent configured in their place."""
    update: dict[str, int] = {} if agent is None else agent.model_dump(exclude_none=True)
    if context_window is not None:
        update["context_window"] = context_window
    limits = config.model_copy(update=update) if update else config
    return limits.threshold_tokens, limits.max_transcript_bytes


@pytest.mark.parametrize("context_window", [None, 1000, 8_000, 32_000, 200_000, 1_000_000])
@pytest.mark.parametrize(
    "agent",
    [
        None,
        CompactionPolicy(),
        CompactionPolicy(reserve_tokens=0),
        CompactionPolicy(reserve_tokens=30_000, soft_threshold_tokens=0),
        CompactionPolicy(soft_threshold_tokens=8_000, max_transcript_bytes=4096),
        CompactionPolicy(reserve_tokens=500, soft_threshold_tokens=100, max_transcript_bytes=10_000_000),
    ],
)
def test_compaction_limits_are_the_settings_with_the_agents_values_in_their_place(
    context_window: int | None, agent: CompactionPolicy | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = CompactionSettings(context_window=50_000, reserve_tokens=9_000, max_transcript_bytes=65_536)
    expected = _copied_limits(config, context_window, agent)
    # worked out per message: from the values, never by copying or dumping a model
    monkeypatch.setattr(CompactionSettings, "model_copy", lambda *a, **k: pytest.fail("settings copied"))
    monkeypatch.setattr(CompactionPolicy, "model_dump", lambda *a, **k: pytest.fail("policy dumped"))
    assert compaction_limits(config, context_window, agent) == expected
    assert threshold_tokens(config, context_window, agent) == expected[0]
    for tokens, size in [(expected[0] - 1, expected[1] - 1), (expected[0], 0), (0, expected[1])]:
        fires = tokens >= expected[0] or size >= expected[1]
        assert crosses_compaction(Window(tokens, size, False), config, context_window, agent) is fires
