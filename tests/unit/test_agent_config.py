"""Agent configuration: defaults fill in a complete effective config, every field is validated with a
precise location, and routing follows the config (scope and identity links)."""

from typing import Any

import pytest
from pydantic import ValidationError

from cairn.events import AgentConfig, InboundMessage
from cairn.events.routing import routing_config, session_key_for

DEFAULTS: dict[str, Any] = {
    "dm_scope": "main",
    "identity_links": {},
    "group_scope": "group",
    "reset": {"mode": "none", "at_hour": 4, "idle_minutes": 60, "timezone": "UTC"},
    "reset_by_type": {},
    "context_window": None,
    "compaction": {"reserve_tokens": None, "soft_threshold_tokens": None, "max_transcript_bytes": None},
    "sessions_visibility": "tree",
    "remember_across_conversations": None,
    "retention": {"dormant_after_days": None, "archive_after_days": None},
    "active_memory": {
        "mode": "escalate",
        "query_mode": "recent",
        "allowed_chat_types": ["direct"],
        "allowed_chat_ids": [],
        "denied_chat_ids": [],
        "timeout_ms": 15000,
        "min_score": 0.65,
    },
    "owner_peers": [],
}
API_EXAMPLE = {
    "dm_scope": "per-channel-peer",
    "identity_links": {"alice": ["telegram:123", "discord:987"]},
    "reset": {"mode": "none"},
    "context_window": 200000,
    "sessions_visibility": "tree",
    "remember_across_conversations": None,
}


def test_an_empty_config_is_all_defaults() -> None:
    assert AgentConfig.model_validate({}).model_dump(mode="json") == DEFAULTS


def test_the_api_example_is_valid_and_the_rest_is_filled_in() -> None:
    effective = AgentConfig.model_validate(API_EXAMPLE).model_dump(mode="json")
    assert effective == {**DEFAULTS, **API_EXAMPLE, "reset": DEFAULTS["reset"]}


@pytest.mark.parametrize(
    "reset",
    [
        {"mode": "daily", "at_hour": 0, "timezone": "Asia/Shanghai"},
        {"mode": "daily", "at_hour": 23, "timezone": "America/Argentina/Buenos_Aires"},
        {"mode": "idle", "idle_minutes": 1},
        {"mode": "none", "timezone": "UTC"},
    ],
)
def test_valid_reset_policies(reset: dict[str, Any]) -> None:
    assert AgentConfig.model_validate({"reset": reset}).reset.model_dump(include=set(reset)) == reset


@pytest.mark.parametrize(
    ("config", "location"),
    [
        ({"dm_scope": "per-user"}, ("dm_scope",)),
        ({"identity_links": {"alice": ["123"]}}, ("identity_links", "alice", 0)),
        ({"identity_links": {"alice": ["telegram: 123"]}}, ("identity_links", "alice", 0)),
        ({"identity_links": {"al:ice": ["telegram:123"]}}, ("identity_links", "al:ice", "[key]")),
        ({"identity_links": {"alice": "telegram:123"}}, ("identity_links", "alice")),
        ({"identity_links": {"a": ["telegram:1"], "b": ["telegram:1"]}}, ("identity_links",)),
        ({"reset": {"mode": "weekly"}}, ("reset", "mode")),
        ({"reset": {"at_hour": 24}}, ("reset", "at_hour")),
        ({"reset": {"at_hour": -1}}, ("reset", "at_hour")),
        ({"reset": {"idle_minutes": 0}}, ("reset", "idle_minutes")),
        ({"reset": {"timezone": "Mars/Olympus_Mons"}}, ("reset", "timezone")),
        ({"reset": {"timezone": "../../etc/passwd"}}, ("reset", "timezone")),
        ({"reset": {"timezone": ""}}, ("reset", "timezone")),
        ({"reset": {"every": "day"}}, ("reset", "every")),
        ({"context_window": 999}, ("context_window",)),
        ({"context_window": "large"}, ("context_window",)),
        ({"sessions_visibility": "public"}, ("sessions_visibility",)),
        ({"remember_across_conversations": "maybe"}, ("remember_across_conversations",)),
        ({"dmScope": "main"}, ("dmScope",)),
        ({"group_scope": "per-peer"}, ("group_scope",)),
        ({"reset_by_type": {"dm": {"mode": "idle"}}}, ("reset_by_type", "dm", "[key]")),
        ({"reset_by_type": {"group": {"mode": "hourly"}}}, ("reset_by_type", "group", "mode")),
        ({"reset_by_type": {"thread": {"timezone": "Mars/Base"}}}, ("reset_by_type", "thread", "timezone")),
        ({"reset_by_type": {"direct": {"idle_minutes": 0}}}, ("reset_by_type", "direct", "idle_minutes")),
        ({"retention": {"dormant_after_days": 0}}, ("retention", "dormant_after_days")),
        ({"retention": {"archive_after_days": -1}}, ("retention", "archive_after_days")),
        ({"retention": {"dormant_after_days": 10, "archive_after_days": 5}}, ("retention",)),
        ({"retention": {"delete_after_days": 5}}, ("retention", "delete_after_days")),
        ({"compaction": {"reserve_tokens": -1}}, ("compaction", "reserve_tokens")),
        ({"compaction": {"soft_threshold_tokens": "lots"}}, ("compaction", "soft_threshold_tokens")),
        ({"compaction": {"max_transcript_bytes": 100}}, ("compaction", "max_transcript_bytes")),
        ({"compaction": {"window": 5}}, ("compaction", "window")),
        ({"identity_links": {"incognito-bob": ["telegram:1"]}}, ("identity_links",)),
        ({"active_memory": {"mode": "sometimes"}}, ("active_memory", "mode")),
        ({"active_memory": {"query_mode": "all"}}, ("active_memory", "query_mode")),
        ({"active_memory": {"allowed_chat_types": ["dm"]}}, ("active_memory", "allowed_chat_types", 0)),
        ({"active_memory": {"allowed_chat_types": "direct"}}, ("active_memory", "allowed_chat_types")),
        ({"active_memory": {"allowed_chat_ids": ["x"] * 257}}, ("active_memory", "allowed_chat_ids")),
        ({"active_memory": {"denied_chat_ids": ["x"] * 257}}, ("active_memory", "denied_chat_ids")),
        ({"active_memory": {"denied_chat_ids": ["x" * 257]}}, ("active_memory", "denied_chat_ids", 0)),
        ({"active_memory": {"denied_chat_ids": [""]}}, ("active_memory", "denied_chat_ids", 0)),
        ({"active_memory": {"allowed_chat_ids": ["a\nb"]}}, ("active_memory", "allowed_chat_ids", 0)),
        ({"active_memory": {"timeout_ms": 249}}, ("active_memory", "timeout_ms")),
        ({"active_memory": {"timeout_ms": 120_001}}, ("active_memory", "timeout_ms")),
        ({"active_memory": {"timeout_ms": 1e30}}, ("active_memory", "timeout_ms")),
        ({"active_memory": {"min_score": -0.01}}, ("active_memory", "min_score")),
        ({"active_memory": {"min_score": 1.01}}, ("active_memory", "min_score")),
        ({"active_memory": {"lanes": 2}}, ("active_memory", "lanes")),
        ({"owner_peers": ["123"]}, ("owner_peers", 0)),
        ({"owner_peers": "telegram:1"}, ("owner_peers",)),
        ({"owner_peers": [f"telegram:{n}" for n in range(33)]}, ("owner_peers",)),
    ],
    ids=lambda v: "-".join(map(str, v)) if isinstance(v, tuple) else None,
)
def test_each_invalid_field_is_named(config: dict[str, Any], location: tuple[str | int, ...]) -> None:
    with pytest.raises(ValidationError) as caught:
        AgentConfig.model_validate(config)
    assert [e["loc"] for e in caught.value.errors()] == [location]


def test_active_memory_bounds_are_inclusive() -> None:
    lowest = {"timeout_ms": 250, "min_score": 0, "allowed_chat_types": [], "denied_chat_ids": ["x"] * 256}
    highest = {"timeout_ms": 120_000, "min_score": 1, "allowed_chat_types": ["direct", "group", "channel"]}
    assert AgentConfig.model_validate({"active_memory": lowest}).active_memory.timeout_ms == 250
    assert AgentConfig.model_validate({"active_memory": highest}).active_memory.min_score == 1.0
    owners = [f"telegram:{n}" for n in range(32)]
    assert len(AgentConfig.model_validate({"owner_peers": owners}).owner_peers) == 32


def test_an_unknown_time_zone_says_what_to_use() -> None:
    with pytest.raises(ValidationError, match="IANA name"):
        AgentConfig.model_validate({"reset": {"timezone": "CEST"}})


def test_a_peer_linked_to_two_people_is_refused_with_both_names() -> None:
    with pytest.raises(ValidationError, match="telegram:1 is linked to both a and b"):
        AgentConfig.model_validate({"identity_links": {"a": ["telegram:1"], "b": ["telegram:1"]}})


def _key(config: dict[str, Any], channel: str, peer: str) -> str:
    message = InboundMessage(text="hi", channel=channel, peer_id=peer)
    return session_key_for(message, routing_config(AgentConfig.model_validate(config)))


def test_routing_follows_the_configured_scope() -> None:
    assert _key({}, "telegram", "123") == _key({}, "telegram", "456") == "agent:main:main"
    scoped = {"dm_scope": "per-channel-peer"}
    assert _key(scoped, "telegram", "123") == "agent:main:telegram:direct:123"
    assert _key(scoped, "telegram", "456") == "agent:main:telegram:direct:456"


def test_identity_links_in_the_config_join_one_person_across_channels() -> None:
    linked = {"dm_scope": "per-peer", "identity_links": {"alice": ["telegram:123", "discord:987"]}}
    assert _key(linked, "telegram", "123") == _key(linked, "discord", "987") == "agent:main:direct:alice"
    assert _key(linked, "telegram", "987") == "agent:main:direct:987"
    assert _key({**linked, "dm_scope": "main"}, "discord", "987") == "agent:main:main"  # links ignored under main


def test_a_reset_override_without_a_zone_takes_the_agents_zone() -> None:
    config = AgentConfig.model_validate(
        {
            "reset": {"mode": "none", "timezone": "Asia/Shanghai"},
            "reset_by_type": {
                "direct": {"mode": "daily", "at_hour": 5},
                "group": {"mode": "idle", "idle_minutes": 15, "timezone": "Europe/Berlin"},
            },
        }
    )
    policies = config.reset_policies()
    assert (policies["direct"].mode, policies["direct"].at_hour, policies["direct"].timezone) == (
        "daily",
        5,
        "Asia/Shanghai",
    )
    assert (policies["group"].mode, policies["group"].idle_minutes, policies["group"].timezone) == (
        "idle",
        15,
        "Europe/Berlin",
    )
    assert set(policies) == {"direct", "group"}


def _group_key(config: dict[str, Any], peer: str) -> str:
    message = InboundMessage(text="hi", channel="telegram", peer_id=peer, chat_type="group", chat_id="-5")
    return session_key_for(message, routing_config(AgentConfig.model_validate(config)))


def test_group_scope_in_the_config_drives_group_routing() -> None:
    assert _group_key({}, "1") == _group_key({}, "2") == "agent:main:telegram:group:-5"
    assert _group_key({"group_scope": "per-member"}, "1") == "agent:main:telegram:group:-5:member:1"
    assert _group_key({"group_scope": "per-member"}, "2") == "agent:main:telegram:group:-5:member:2"
