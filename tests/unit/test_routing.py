"""Session keys for every dm_scope × chat type × thread × identity-link case, and reset commands."""

from typing import Any

import pytest

from cairn.events import InboundMessage
from cairn.events.routing import DmScope, RoutingConfig, RoutingError, is_reset_command, session_key_for

SCOPES: tuple[DmScope, ...] = ("main", "per-peer", "per-channel-peer", "per-account-channel-peer")
LINKS = {"alice": ("telegram:123", "discord:987")}


def msg(**fields: Any) -> InboundMessage:
    return InboundMessage.model_validate({"text": "hello", **fields})


TG_123 = {"channel": "telegram", "peer_id": "123"}
DC_987 = {"channel": "discord", "peer_id": "987"}
TG_456 = {"channel": "telegram", "peer_id": "456"}
TG_BOT = {"channel": "telegram", "peer_id": "123", "account_id": "bot-1"}

# (id, dm_scope, identity links?, message fields, expected key)
KEY_CASES: list[tuple[str, DmScope, bool, dict[str, Any], str]] = [
    # main: every direct message of an agent shares one session, whoever sends it
    ("main-direct", "main", False, TG_123, "agent:main:main"),
    ("main-direct-other-person", "main", False, DC_987, "agent:main:main"),
    ("main-direct-no-peer", "main", False, {"channel": "api"}, "agent:main:main"),
    ("main-direct-account", "main", False, TG_BOT, "agent:main:main"),
    ("main-direct-links-ignored", "main", True, TG_123, "agent:main:main"),
    ("main-direct-thread", "main", False, {**TG_123, "thread_id": "42"}, "agent:main:main:thread:42"),
    ("main-direct-other-agent", "main", False, {**TG_123, "agent_id": "ops"}, "agent:ops:main"),
    # per-peer: one session per person, across channels
    ("per-peer-direct", "per-peer", False, TG_123, "agent:main:direct:123"),
    ("per-peer-direct-same-id-other-channel", "per-peer", False, {**DC_987, "peer_id": "123"}, "agent:main:direct:123"),
    ("per-peer-direct-other-person", "per-peer", False, TG_456, "agent:main:direct:456"),
    ("per-peer-direct-linked-telegram", "per-peer", True, TG_123, "agent:main:direct:alice"),
    ("per-peer-direct-linked-discord", "per-peer", True, DC_987, "agent:main:direct:alice"),
    ("per-peer-direct-unlinked", "per-peer", True, TG_456, "agent:main:direct:456"),
    ("per-peer-direct-account-ignored", "per-peer", False, TG_BOT, "agent:main:direct:123"),
    ("per-peer-direct-thread", "per-peer", True, {**DC_987, "thread_id": "t1"}, "agent:main:direct:alice:thread:t1"),
    # per-channel-peer: one session per person per channel
    ("per-channel-peer-direct", "per-channel-peer", False, TG_123, "agent:main:telegram:direct:123"),
    ("per-channel-peer-direct-discord", "per-channel-peer", False, DC_987, "agent:main:discord:direct:987"),
    ("per-channel-peer-direct-linked", "per-channel-peer", True, TG_123, "agent:main:telegram:direct:alice"),
    ("per-channel-peer-direct-linked-discord", "per-channel-peer", True, DC_987, "agent:main:discord:direct:alice"),
    (
        "per-channel-peer-direct-thread",
        "per-channel-peer",
        False,
        {**TG_123, "thread_id": "9"},
        "agent:main:telegram:direct:123:thread:9",
    ),
    # per-account-channel-peer: one session per bot account, channel and person
    ("per-account-direct", "per-account-channel-peer", False, TG_BOT, "agent:main:telegram:bot-1:direct:123"),
    ("per-account-direct-default", "per-account-channel-peer", False, TG_123, "agent:main:telegram:default:direct:123"),
    ("per-account-direct-linked", "per-account-channel-peer", True, TG_BOT, "agent:main:telegram:bot-1:direct:alice"),
    (
        "per-account-direct-thread",
        "per-account-channel-peer",
        False,
        {**TG_BOT, "thread_id": "9"},
        "agent:main:telegram:bot-1:direct:123:thread:9",
    ),
]

# Groups and channels are keyed by the chat, whatever the dm_scope and links say.
for scope in SCOPES:
    for chat_type in ("group", "channel"):
        chat = {**TG_123, "chat_type": chat_type, "chat_id": "-100"}
        KEY_CASES += [
            (f"{scope}-{chat_type}", scope, True, chat, f"agent:main:telegram:{chat_type}:-100"),
            (
                f"{scope}-{chat_type}-thread",
                scope,
                False,
                {**chat, "thread_id": "77"},
                f"agent:main:telegram:{chat_type}:-100:thread:77",
            ),
            (
                f"{scope}-{chat_type}-no-peer",
                scope,
                False,
                {"channel": "slack", "chat_type": chat_type, "chat_id": "C01"},
                f"agent:main:slack:{chat_type}:C01",
            ),
        ]

# An explicit key wins over everything, including what would otherwise be an error or a thread suffix.
for scope in SCOPES:
    for chat_type in ("direct", "group", "channel"):
        KEY_CASES.append(
            (
                f"{scope}-{chat_type}-explicit-key",
                scope,
                True,
                {"chat_type": chat_type, "thread_id": "5", "session_key": "agent:main:api:direct:console-1"},
                "agent:main:api:direct:console-1",
            )
        )


def config(scope: DmScope, linked: bool) -> RoutingConfig:
    return RoutingConfig(dm_scope=scope, identity_links=LINKS if linked else {})


@pytest.mark.parametrize(
    ("scope", "linked", "fields", "expected"), [c[1:] for c in KEY_CASES], ids=[c[0] for c in KEY_CASES]
)
def test_session_key(scope: DmScope, linked: bool, fields: dict[str, Any], expected: str) -> None:
    assert session_key_for(msg(**fields), config(scope, linked)) == expected


def test_under_main_two_people_share_one_session_and_per_channel_peer_separates_them() -> None:
    """The pitfall of the default: two strangers writing to the bot land in one conversation."""
    alice, bob = msg(**TG_123), msg(**TG_456)
    shared = config("main", False)
    assert session_key_for(alice, shared) == session_key_for(bob, shared) == "agent:main:main"
    separate = config("per-channel-peer", False)
    assert session_key_for(alice, separate) != session_key_for(bob, separate)


def test_identity_links_join_one_person_across_channels_only_when_keyed_by_peer() -> None:
    telegram, discord = msg(**TG_123), msg(**DC_987)
    per_peer = config("per-peer", True)
    assert session_key_for(telegram, per_peer) == session_key_for(discord, per_peer) == "agent:main:direct:alice"
    unlinked = config("per-peer", False)
    assert session_key_for(telegram, unlinked) != session_key_for(discord, unlinked)
    main = config("main", True)
    assert session_key_for(telegram, main) == session_key_for(discord, main) == "agent:main:main"


def test_identity_link_needs_the_channel_as_well_as_the_peer() -> None:
    """`discord:123` is not `telegram:123`: only the listed channel address is linked."""
    assert session_key_for(msg(channel="discord", peer_id="123"), config("per-peer", True)) == "agent:main:direct:123"


@pytest.mark.parametrize("scope", [s for s in SCOPES if s != "main"])
@pytest.mark.parametrize("peer", [None, ""], ids=["absent", "empty"])
def test_direct_message_without_peer_is_refused_when_keyed_by_peer(scope: DmScope, peer: str | None) -> None:
    with pytest.raises(RoutingError, match=scope) as caught:
        session_key_for(msg(channel="telegram", peer_id=peer), config(scope, False))
    assert caught.value.field == "peer_id"


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("chat_type", ["group", "channel"])
def test_group_or_channel_without_chat_id_is_refused(scope: DmScope, chat_type: str) -> None:
    with pytest.raises(RoutingError, match=chat_type) as caught:
        session_key_for(msg(channel="telegram", peer_id="123", chat_type=chat_type), config(scope, False))
    assert caught.value.field == "chat_id"


def test_routing_error_is_a_value_error() -> None:
    assert issubclass(RoutingError, ValueError)


@pytest.mark.parametrize(
    ("text", "role", "expected"),
    [
        ("/new", "user", "new"),
        ("/reset", "user", "reset"),
        ("/reset extra", "user", "reset"),
        (" /NEW", "user", "new"),
        ("/Reset\nplease start over", "user", "reset"),
        ("/new", "assistant", None),
        ("/reset", "system", None),
        ("/new", "tool", None),
        ("/newer", "user", None),
        ("/resets", "user", None),
        ("new", "user", None),
        ("please /new", "user", None),
        ("   ", "user", None),
    ],
    ids=[
        "new",
        "reset",
        "reset-with-words",
        "leading-space-upper",
        "mixed-case-multiline",
        "assistant",
        "system",
        "tool",
        "newer",
        "resets",
        "no-slash",
        "not-first-word",
        "blank",
    ],
)
def test_is_reset_command(text: str, role: str, expected: str | None) -> None:
    assert is_reset_command(msg(text=text, role=role)) == expected
