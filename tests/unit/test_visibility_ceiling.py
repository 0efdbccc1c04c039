"""The agent's sessions_visibility is a ceiling: a request narrows it, never widens it; a key limited to agents
never reaches every agent's sessions."""

import itertools

import pytest

from cairn.edge.auth import KeyGrant
from cairn.recall.visibility import WIDENING, effective

EVERY_AGENT = KeyGrant("t", "k", frozenset({"read"}), None, None)
SOME_AGENTS = KeyGrant("t", "k", frozenset({"read"}), frozenset({"main"}), None)


@pytest.mark.parametrize(("ceiling", "asked"), list(itertools.product(WIDENING, WIDENING)))
def test_a_request_only_narrows(ceiling: str, asked: str) -> None:
    chosen = effective(ceiling, asked, EVERY_AGENT)  # type: ignore[arg-type]
    assert WIDENING.index(chosen) == min(WIDENING.index(ceiling), WIDENING.index(asked))


@pytest.mark.parametrize("ceiling", WIDENING)
def test_no_request_value_is_the_ceiling(ceiling: str) -> None:
    assert effective(ceiling, None, None) == ceiling  # type: ignore[arg-type]


def test_a_key_limited_to_agents_sees_at_most_its_agent() -> None:
    assert effective("all", "all", SOME_AGENTS) == "agent"
    assert effective("all", None, SOME_AGENTS) == "agent"
    assert effective("tree", "all", SOME_AGENTS) == "tree"
