"""Session keys for every dm_scope × group_scope × chat type × thread × identity-link case, and reset commands."""

from typing import Any

import pytest

from cairn.events import InboundMessage
from cairn.events.routing import (
    DmScope,
    GroupScope,
    RoutingConfig,
    RoutingError,
    active_memory_command,
    incognito_thread_key,
    is_active_memory_command,
    is_incognito,
    is_reset_command,
    session_key_for,
)

SCOPES: tuple[DmScope, ...] = ("main", "per-peer", "per-channel-peer", "per-account-channel-peer")
LINKS = {"alice": ("telegram:123", "discord:987")}


def msg(**fields: Any) -> InboundMessage:
    return InboundMessage.model_validate({"text": "hello", **fields})


TG_123 = {"channel": "telegram", "peer_id": "123"}
DC_987 = {"channel": "discord", "peer_id": "987"}
TG_456 = {"channel": "telegram", "peer_id": "456"}
TG_BOT = {"channel": "telegram", "peer_id": "123", "account_id": "bot-1"}

# (id, dm_scope, identity links?, message fields, expected key[, group_scope])
KEY_CASES: list[tuple[Any, ...]] = [
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

# Groups and channels follow group_scope, whatever the dm_scope says: (id suffix, group_scope, linked?, message
# fields, expected key), each for both chat types and under every dm_scope.
GROUP_CASES: list[tuple[str, GroupScope, bool, dict[str, Any], str]] = [
    # group (default): everyone in the chat shares one session, whoever speaks and through which bot
    ("group", "group", True, TG_123, "agent:main:telegram:{t}:-100"),
    ("group-other-member", "group", False, TG_456, "agent:main:telegram:{t}:-100"),
    ("group-account-ignored", "group", False, TG_BOT, "agent:main:telegram:{t}:-100"),
    ("group-thread", "group", False, {**TG_123, "thread_id": "77"}, "agent:main:telegram:{t}:-100:thread:77"),
    ("group-no-peer", "group", False, {"channel": "slack"}, "agent:main:slack:{t}:-100"),
    # per-account: several bots in one chat keep their own sessions
    ("per-account", "per-account", False, TG_BOT, "agent:main:telegram:bot-1:{t}:-100"),
    ("per-account-default", "per-account", False, TG_123, "agent:main:telegram:default:{t}:-100"),
    (
        "per-account-member-ignored",
        "per-account",
        True,
        {**TG_BOT, "peer_id": "456"},
        "agent:main:telegram:bot-1:{t}:-100",
    ),
    (
        "per-account-thread",
        "per-account",
        False,
        {**TG_BOT, "thread_id": "77"},
        "agent:main:telegram:bot-1:{t}:-100:thread:77",
    ),
    # per-member: each member of the chat has a session of their own, linked identities included
    ("per-member", "per-member", False, TG_123, "agent:main:telegram:{t}:-100:member:123"),
    ("per-member-other-member", "per-member", False, TG_456, "agent:main:telegram:{t}:-100:member:456"),
    ("per-member-linked", "per-member", True, TG_123, "agent:main:telegram:{t}:-100:member:alice"),
    ("per-member-unlinked", "per-member", True, TG_456, "agent:main:telegram:{t}:-100:member:456"),
    (
        "per-member-thread",
        "per-member",
        True,
        {**TG_123, "thread_id": "77"},
        "agent:main:telegram:{t}:-100:member:alice:thread:77",
    ),
]
for scope in SCOPES:
    for chat_type in ("group", "channel"):
        for suffix, group_scope, linked, fields, expected in GROUP_CASES:
            chat = {**fields, "chat_type": chat_type, "chat_id": "-100"}
            KEY_CASES.append(
                (f"{scope}-{chat_type}-{suffix}", scope, linked, chat, expected.format(t=chat_type), group_scope)
            )

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


def config(scope: DmScope, linked: bool, group_scope: GroupScope = "group") -> RoutingConfig:
    return RoutingConfig(dm_scope=scope, identity_links=LINKS if linked else {}, group_scope=group_scope)


@pytest.mark.parametrize(
    ("scope", "linked", "fields", "expected", "group_scope"),
    [(*c[1:5], c[5] if len(c) > 5 else "group") for c in KEY_CASES],
    ids=[c[0] for c in KEY_CASES],
)
def test_session_key(
    scope: DmScope, linked: bool, fields: dict[str, Any], expected: str, group_scope: GroupScope
) -> None:
    assert session_key_for(msg(**fields), config(scope, linked, group_scope)) == expected


@pytest.mark.parametrize("group_scope", ["group", "per-account", "per-member"])
def test_group_scope_never_changes_direct_keys(group_scope: GroupScope) -> None:
    for scope in SCOPES:
        assert session_key_for(msg(**TG_123), config(scope, True, group_scope)) == session_key_for(
            msg(**TG_123), config(scope, True)
        )


def test_in_a_group_two_members_share_one_session_and_per_member_separates_them() -> None:
    """The group counterpart of the main-scope pitfall: by default a group is one conversation."""
    alice = msg(**TG_123, chat_type="group", chat_id="-100")
    bob = msg(**TG_456, chat_type="group", chat_id="-100")
    shared = config("per-channel-peer", False)
    assert session_key_for(alice, shared) == session_key_for(bob, shared)
    separate = config("per-channel-peer", False, "per-member")
    assert session_key_for(alice, separate) != session_key_for(bob, separate)


@pytest.mark.parametrize("chat_type", ["group", "channel"])
def test_per_member_needs_the_peer(chat_type: str) -> None:
    with pytest.raises(RoutingError, match="per-member") as caught:
        session_key_for(
            msg(channel="telegram", chat_type=chat_type, chat_id="-100"), config("main", False, "per-member")
        )
    assert caught.value.field == "peer_id"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"channel": "incognito-web"}, "channel"),
        ({"agent_id": "incognito-bot"}, "agent_id"),
        ({"peer_id": "incognito-7"}, "peer_id"),
        ({"account_id": "incognito-a"}, "account_id"),
        ({"chat_type": "group", "chat_id": "incognito-1"}, "chat_id"),
        ({"chat_type": "group", "chat_id": "-1", "thread_id": "x:incognito-2"}, "thread_id"),
    ],
)
def test_ids_that_would_make_a_key_look_incognito_are_refused(fields: dict[str, Any], field: str) -> None:
    """Such a key would be persisted, yet read as a memory-only thread: the prefix is reserved."""
    base = {"channel": "telegram", "peer_id": "123", **fields}
    with pytest.raises(RoutingError, match="incognito-") as caught:
        session_key_for(msg(**base), config("per-account-channel-peer", False))
    assert caught.value.field == field


def test_an_incognito_thread_key_is_recognised_and_no_derived_key_is() -> None:
    key = incognito_thread_key("main")
    assert is_incognito(key)
    assert key.startswith("agent:main:dashboard:incognito-")
    assert not is_incognito("agent:main:telegram:direct:not-incognito-1")
    assert not any(is_incognito(c[4]) for c in KEY_CASES)


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


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/active-memory off", "off"),
        ("/active-memory on", "on"),
        ("/active-memory status", "status"),
        ("/active-memory", "status"),
        ("  /ACTIVE-MEMORY   Off \n", "off"),
        ("\t/Active-Memory\tON", "on"),
        ("/active-memory offline", None),
        ("/active-memory off please", None),
        ("/active-memory toggle", None),
        ("/active-memoryoff", None),
        ("/active-memories off", None),
        ("active-memory off", None),
        ("please /active-memory off", None),
        ("", None),
    ],
)
def test_active_memory_command_is_recognised_exactly(text: str, expected: str | None) -> None:
    assert active_memory_command(text) == expected
    assert is_active_memory_command(msg(text=text or " ", role="user")) == expected


@pytest.mark.parametrize("role", ["assistant", "system", "tool"])
def test_only_a_user_sends_an_active_memory_command(role: str) -> None:
    assert is_active_memory_command(msg(text="/active-memory off", role=role)) is None


@pytest.mark.parametrize(
    "key",
    [
        "agent:main:main",
        "agent:main:dashboard:incognito-1",
        "incognito-x",
        "agent:main:telegram:direct:not-incognito-1",
        "agent:main:telegram:direct:incognito",
        "agent:main:slack:group:incognito-:thread:7",
        "cron:incognito-job",
        "agent:main:web:direct:xincognito-y:thread:incognito-2",
        "",
    ],
)
def test_incognito_is_a_segment_starting_with_the_prefix_whether_or_not_the_key_is_split(key: str) -> None:
    """The fast answer for keys without the prefix anywhere is the answer of the rule itself."""
    assert is_incognito(key) is any(s.startswith("incognito-") for s in key.split(":"))
