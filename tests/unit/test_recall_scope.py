"""Recall's scope as pure rules: which messages get recall, and whose conversation each session key is."""

from typing import Any

import pytest

from cairn.events import ActiveMemory, AgentConfig, InboundMessage
from cairn.events.routing import routing_config, session_key_for
from cairn.recall.recall_scope import (
    OWNER,
    SessionFacts,
    chat_ids_of,
    eligibility,
    person_of,
    recalls_across_conversations,
)

ALICE = {"alice": ("telegram:123", "discord:987")}


def _config(**fields: Any) -> AgentConfig:
    return AgentConfig.model_validate(fields)


def _key(config: AgentConfig, channel: str, peer: str, **fields: Any) -> str:
    message = InboundMessage(text="hi", channel=channel, peer_id=peer, **fields)
    return session_key_for(message, routing_config(config))


# --- person_of ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dm_scope", ["main", "per-peer", "per-channel-peer", "per-account-channel-peer"])
def test_two_peers_of_one_agent_are_two_people_under_every_scope_but_main(dm_scope: str) -> None:
    config = _config(dm_scope=dm_scope)
    first = person_of(_key(config, "telegram", "123"), config, "telegram")
    second = person_of(_key(config, "telegram", "456"), config, "telegram")
    if dm_scope == "main":  # every DM is the main session: the owner's, by what dm_scope main means
        assert first == second == OWNER
    else:
        assert first == "telegram:123"
        assert second == "telegram:456"


@pytest.mark.parametrize("dm_scope", ["per-peer", "per-channel-peer", "per-account-channel-peer"])
def test_identity_links_join_telegram_and_discord_into_one_person(dm_scope: str) -> None:
    config = _config(dm_scope=dm_scope, identity_links=ALICE)
    on_telegram = _key(config, "telegram", "123", account_id="bot1")
    on_discord = _key(config, "discord", "987", account_id="bot2")
    assert person_of(on_telegram, config, "telegram") == person_of(on_discord, config, "discord") == "alice"
    assert person_of(_key(config, "discord", "123"), config, "discord") == "discord:123"  # not Alice's discord


def test_a_peer_linked_after_its_session_was_keyed_is_the_linked_person() -> None:
    config = _config(dm_scope="per-channel-peer", identity_links=ALICE)
    assert person_of("agent:main:telegram:direct:123", config) == "alice"
    assert person_of("agent:main:telegram:bot1:direct:123", config) == "alice"
    assert person_of("agent:main:direct:123", config, "telegram") == "alice"


@pytest.mark.parametrize(
    ("key", "channel", "expected"),
    [
        ("agent:main:main", None, OWNER),
        ("agent:main:dashboard:0b5e8f9a-3c1d-4e2f-8a6b-7c9d0e1f2a3b", None, OWNER),
        ("agent:main:direct:123", "telegram", "telegram:123"),
        ("agent:main:direct:123", None, "123"),  # the channel unknown: the bare id, never anyone else's address
        ("agent:main:telegram:direct:123", None, "telegram:123"),
        ("agent:main:telegram:direct:123", "discord", "telegram:123"),  # the key's channel wins
        ("agent:main:telegram:bot1:direct:123", None, "telegram:123"),
        ("agent:main:telegram:direct:123:thread:9", None, "telegram:123"),  # a DM's thread is its person's
        ("agent:main:direct:owner", None, "owner"),  # a peer named "owner" is not the owner
        ("agent:main:telegram:group:42", "telegram", None),
        ("agent:main:telegram:bot1:group:42", "telegram", None),
        ("agent:main:telegram:group:42:member:alice", "telegram", None),
        ("agent:main:telegram:group:42:thread:7", "telegram", None),
        ("agent:main:slack:channel:C1", "slack", None),
        ("agent:main:slack:channel:C1:thread:1700000000.1", "slack", None),
        ("cron:nightly", "cron", None),
        ("heartbeat:main", "heartbeat", None),
        ("hook:github", "api", None),
        ("agent:main:subagent:7f3a", "api", None),
        ("agent:main:dashboard:incognito-0b5e8f9a", None, None),
        ("agent:main", None, None),
        ("agent:main:telegram:x:y:direct:123", None, None),  # no known shape
        ("something-else", None, None),
    ],
)
def test_person_of_every_key_shape(key: str, channel: str | None, expected: str | None) -> None:
    assert person_of(key, _config(dm_scope="per-channel-peer"), channel) == expected


def test_owner_peers_are_the_owner_on_their_channel_only() -> None:
    config = _config(dm_scope="per-channel-peer", owner_peers=["telegram:42"])
    assert person_of("agent:main:telegram:direct:42", config) == OWNER
    assert person_of("agent:main:direct:42", config, "telegram") == OWNER
    assert person_of("agent:main:discord:direct:42", config) == "discord:42"
    assert person_of("agent:main:direct:42", config) == "42"  # per-peer, channel unknown: not assumed the owner
    assert person_of("agent:main:telegram:group:42", config, "telegram") is None  # a group is nobody's


def test_a_linked_person_with_an_owner_peer_is_the_owner_on_every_linked_peer() -> None:
    config = _config(
        dm_scope="per-peer", identity_links={"me": ["telegram:42", "discord:7"]}, owner_peers=["telegram:42"]
    )
    assert person_of(_key(config, "discord", "7"), config, "discord") == OWNER
    assert person_of(_key(config, "telegram", "42"), config, "telegram") == OWNER
    assert person_of(_key(config, "telegram", "43"), config, "telegram") == "telegram:43"


def test_the_owner_constant_cannot_be_a_person_or_a_peer_address() -> None:
    with pytest.raises(ValueError, match="identity_links"):
        _config(identity_links={OWNER: ["telegram:1"]})
    with pytest.raises(ValueError, match="owner_peers"):
        _config(owner_peers=[OWNER])


def test_recall_reads_a_null_remember_across_conversations_as_on_whatever_the_scope() -> None:
    assert recalls_across_conversations(_config(dm_scope="per-channel-peer"))
    assert recalls_across_conversations(_config(dm_scope="main"))
    assert recalls_across_conversations(_config(remember_across_conversations=True))
    assert not recalls_across_conversations(_config(remember_across_conversations=False))


# --- eligibility -----------------------------------------------------------------------------------------------

DM = SessionFacts("agent:main:telegram:direct:123", "0b5e8f9a-3c1d-4e2f-8a6b-7c9d0e1f2a3b", "direct", "telegram", True)
GROUP = SessionFacts(
    "agent:main:telegram:group:-100", "0b5e8f9a-3c1d-4e2f-8a6b-7c9d0e1f2a3c", "group", "telegram", True
)


def _why(facts: SessionFacts, *, text: str = "what did we decide?", **config: Any) -> str | None:
    return eligibility(facts, ActiveMemory.model_validate(config), text=text)


def test_a_user_message_in_a_direct_session_is_eligible() -> None:
    assert _why(DM) is None
    assert _why(SessionFacts.unstored("agent:main:main")) is None  # not stored yet: direct, recall on


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (SessionFacts.unstored("cron:nightly", "direct", "cron"), "cron session"),
        (SessionFacts.unstored("agent:main:main", "direct", "cron"), "cron session"),
        (SessionFacts.unstored("agent:main:main", "direct", "heartbeat"), "heartbeat"),
        (SessionFacts.unstored("hook:github", "direct", "api"), "hook session"),
        (SessionFacts.unstored("agent:main:subagent:7f3a", "direct", "api"), "sub-agent session"),
        (SessionFacts.unstored("agent:main:dashboard:incognito-1", "direct", "api"), "incognito session"),
        (
            SessionFacts(DM.session_key, DM.session_id, "direct", "telegram", False),
            "active memory is off for this session",
        ),
        (GROUP, "chat type group is not allowed"),
        (SessionFacts.unstored("agent:main:slack:channel:C1", "channel", "slack"), "chat type channel is not allowed"),
    ],
)
def test_ineligible_sessions_say_why(facts: SessionFacts, expected: str) -> None:
    assert _why(facts) == expected


def test_the_messages_own_channel_names_a_heartbeat_in_the_main_session() -> None:
    main = SessionFacts("agent:main:main", None, "direct", "telegram", True)
    config = ActiveMemory()
    assert eligibility(main, config, text="ping", channel="heartbeat") == "heartbeat"
    assert eligibility(main, config, text="ping", channel="telegram") is None


@pytest.mark.parametrize(
    ("text", "role", "expected"),
    [
        ("what did we decide?", "assistant", "not a user message"),
        ("what did we decide?", "tool", "not a user message"),
        ("   ", "user", "empty message"),
        ("/active-memory off", "user", "a session command, not a message"),
        ("/active-memory", "user", "a session command, not a message"),
        ("/new", "user", "a session command, not a message"),
        ("/reset now", "user", "a session command, not a message"),
        ("/active-memory offline", "user", None),  # an ordinary message, as the session service stores it
    ],
)
def test_only_a_users_message_gets_recall(text: str, role: str, expected: str | None) -> None:
    assert eligibility(DM, ActiveMemory(), text=text, role=role) == expected


@pytest.mark.parametrize("name", ["telegram:123", "123", "agent:main:telegram:direct:123"])
def test_a_denied_chat_is_named_by_its_key_its_id_or_channel_and_id(name: str) -> None:
    assert _why(DM, denied_chat_ids=[name]) == "chat id denied"
    assert _why(DM, denied_chat_ids=[name], allowed_chat_ids=[name]) == "chat id denied"  # deny wins


def test_a_thread_is_denied_with_its_chat() -> None:
    thread = SessionFacts.unstored("agent:main:telegram:group:-100:thread:7", "group", "telegram")
    assert _why(thread, denied_chat_ids=["telegram:-100"], allowed_chat_types=["group"]) == "chat id denied"


def test_allowed_chat_ids_narrow_the_allowed_chat_types() -> None:
    groups = ["direct", "group"]
    assert _why(GROUP, allowed_chat_types=groups) is None
    assert _why(GROUP, allowed_chat_types=groups, allowed_chat_ids=["telegram:-100"]) is None
    narrowed = _why(GROUP, allowed_chat_types=groups, allowed_chat_ids=["telegram:-200"])
    assert narrowed == "chat id is not in allowed_chat_ids"
    assert _why(GROUP, allowed_chat_ids=["telegram:-100"]) == "chat type group is not allowed"
    assert _why(GROUP, allowed_chat_types=groups, denied_chat_ids=["-100"]) == "chat id denied"


def test_chat_ids_of_each_shape() -> None:
    assert chat_ids_of("agent:main:main", "telegram") == {"agent:main:main"}
    assert chat_ids_of("agent:main:telegram:bot1:group:-100:member:alice", None) == {
        "agent:main:telegram:bot1:group:-100:member:alice",
        "-100",
        "telegram:-100",
    }
    assert chat_ids_of("agent:main:direct:alice", "discord") == {"agent:main:direct:alice", "alice", "discord:alice"}
