"""The 32 KiB cap of `POST /v1/sessions/search`: a page whose bound fits is kept without encoding each hit, and
the hits kept are exactly those that measuring every hit keeps (tests/e2e/test_search_suite.py checks the cap
through the API)."""

import json
import random
from datetime import UTC, datetime, timedelta, timezone

import pytest

from cairn.recall import api
from cairn.recall.api import SessionHit, _page_bound, _within_budget

BUDGET = 32 * 1024
AWKWARD = ['"', "\\", "\n", "\x00", "\x1f", "\x7f", "\u2028", "é", "上海", "😀", "\ud7ff", "a"]


def _hit(
    snippet: str, external_id: str | None = "m-1", score: float = 1.25, offset: timedelta | None = None
) -> SessionHit:
    zone = UTC if offset is None else timezone(offset)
    return SessionHit(session_key="agent:main:telegram:direct:alice", session_id="0b3c7f5e-1d2a-4c1e-9a7b-1234",
                      message_id=external_id or "c1", cairn_message_id="0b3c7f5e-1d2a-4c1e-9a7b-5678",
                      external_id=external_id, role="user", occurred_at=datetime(2026, 11, 3, 12, 0, 1, 123456, zone),
                      snippet=snippet, score=score)  # fmt: skip


def _measured(hits: list[SessionHit], budget: int) -> tuple[list[SessionHit], bool]:
    """The cap as it was before the bound: every hit encoded and counted."""
    kept: list[SessionHit] = []
    used = 64
    for hit in hits:
        size = len(json.dumps(hit.model_dump(mode="json"), ensure_ascii=False).encode()) + 1
        if used + size > budget:
            return kept, True
        kept.append(hit)
        used += size
    return kept, False


def _random_hits(rng: random.Random, count: int) -> list[SessionHit]:
    offsets = [None, timedelta(hours=5, minutes=30, seconds=15), timedelta(hours=-11)]
    scores = [0.0, 1e-06, 5e-06, 1.000001, 0.123456, -1.2345678901234567e-308, float("inf")]
    hits = []
    for _ in range(count):
        snippet = "".join(rng.choice(AWKWARD) for _ in range(rng.randint(0, 300)))
        hits.append(_hit(snippet, rng.choice([None, "m-" + "x" * 40]), rng.choice(scores), rng.choice(offsets)))
    return hits


def _counted(hits: list[SessionHit]) -> int:
    return 64 + sum(len(json.dumps(hit.model_dump(mode="json"), ensure_ascii=False).encode()) + 1 for hit in hits)


def test_the_bound_of_a_page_is_never_below_what_its_hits_count() -> None:
    rng = random.Random(26)
    for count in (0, 1, 2, 10, 25):
        for _ in range(40):
            hits = _random_hits(rng, count)
            assert _counted(hits) <= _page_bound(hits) <= _counted(hits) + 64 * count
    control = [_hit("\x01" * 300)]  # the worst case of escaping: six bytes a character
    assert _counted(control) <= _page_bound(control)


@pytest.mark.parametrize("seed", range(8))
def test_the_hits_kept_are_those_measuring_every_hit_keeps(seed: int) -> None:
    rng = random.Random(seed)
    hits = _random_hits(rng, 25)
    for budget in (1024, 4096, 9000, 16_000, 20_000, BUDGET, 64 * 1024):
        assert _within_budget(hits, budget) == _measured(hits, budget)
    big = [_hit("😀" * 300) for _ in range(25)]  # 25 snippets of 4-byte characters: over the cap
    kept, truncated = _within_budget(big, BUDGET)
    assert truncated
    assert 0 < len(kept) < 25
    assert (kept, truncated) == _measured(big, BUDGET)


def test_a_page_well_under_the_cap_is_kept_without_encoding_a_hit(monkeypatch: pytest.MonkeyPatch) -> None:
    def encode(hit: SessionHit) -> int:
        raise AssertionError("a hit was encoded to be measured")

    monkeypatch.setattr(api, "_encoded_size", encode)
    page = [_hit("张伟 说 deploy 要改到明天 ✓ " * 15) for _ in range(25)]
    assert _within_budget(page, BUDGET) == (page, False)
