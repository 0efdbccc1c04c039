"""`KnownConfigs`: recall's in-process memory of agents' configs, fresh for a few seconds, and the last one known
(however old) for the deadline of the next read."""

from cairn.events import AgentConfig
from cairn.recall.recall_reads import DEFAULT_TIMEOUT_MS, KnownConfigs, RecallReads


def _config(timeout_ms: int) -> AgentConfig:
    return AgentConfig.model_validate({"active_memory": {"timeout_ms": timeout_ms}})


def test_a_config_just_read_is_fresh_and_an_expired_one_is_still_the_last_known() -> None:
    known = KnownConfigs(fresh_s=60)
    known.keep("t", "a", _config(2000))
    assert known.fresh("t", "a") == _config(2000)
    expired = KnownConfigs(fresh_s=0)
    expired.keep("t", "a", _config(2000))
    assert expired.fresh("t", "a") is None
    assert expired.last("t", "a") == _config(2000)
    assert expired.last("t", "other") is None


def test_the_least_recently_read_agent_is_forgotten_first() -> None:
    known = KnownConfigs(kept=2)
    known.keep("t", "a", _config(1000))
    known.keep("t", "b", _config(2000))
    known.keep("t", "a", _config(3000))
    known.keep("t", "c", _config(4000))
    assert known.last("t", "b") is None
    assert known.last("t", "a") == _config(3000)


def test_an_agent_never_read_has_the_default_deadline_and_a_known_one_its_own() -> None:
    reads = RecallReads(None, KnownConfigs())  # type: ignore[arg-type]  # no read happens here
    assert reads.deadline_ms("t", "a") == DEFAULT_TIMEOUT_MS == 15_000
    reads.known.keep("t", "a", _config(1200))
    assert reads.deadline_ms("t", "a") == 1200
