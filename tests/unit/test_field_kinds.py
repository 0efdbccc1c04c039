"""The field kinds of the door (`cairn.events.fields`) agree with what every consumer can store: whatever a
message body or an agent config passes validation with is text PostgreSQL can hold (no NUL, valid UTF-8), a
timestamptz that is neither `infinity` nor out of range as asyncpg writes it, an `int` within int32, and a
config `agent.configured` can carry in one NATS message. Property-based: hypothesis draws unicode of every
category (controls and lone surrogates included), extreme dates and numbers."""

import json
import unicodedata
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from cairn.events import AgentConfig, AgentConfigured, InboundMessage, MessageReceived, decode_event
from cairn.events.agents import MAX_CONTEXT_WINDOW
from cairn.events.fields import INT32_MAX, MAX_YEAR, MIN_YEAR

# What PostgreSQL and asyncpg impose, written independently of the validators.
ASYNCPG_INFINITIES = (datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC))
NATS_MAX_PAYLOAD = 1024 * 1024


def storable_text(value: str) -> bool:
    """PostgreSQL text (UTF-8 database): no NUL, and the string must encode as UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in value


def storable_time(value: datetime) -> bool:
    """A timestamptz asyncpg writes as that instant (not as ±infinity), comparable with aware times."""
    if value.tzinfo is None:
        return False
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        return False
    return utc not in ASYNCPG_INFINITIES


anything = st.text(st.characters(codec=None, categories=None), max_size=40)  # every code point, surrogates too
offsets = st.integers(min_value=-14 * 60, max_value=14 * 60).map(lambda m: timezone(timedelta(minutes=m)))
times = st.one_of(
    st.datetimes(timezones=offsets),
    st.datetimes(min_value=datetime(9999, 12, 30), timezones=offsets),
    st.datetimes(max_value=datetime(1900, 1, 2), timezones=offsets),
    st.sampled_from(["0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z", "9999-12-31T23:59:59-14:00"]),
)
time_inputs = st.one_of(
    times.map(lambda t: t if isinstance(t, str) else t.isoformat()),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.datetimes(),  # naive
)
messages = st.fixed_dictionaries(
    {"text": anything.filter(bool)},
    optional={
        "peer_id": anything,
        "message_id": anything.filter(bool),
        "sender_name": anything,
        "account_id": anything,
        "chat_id": anything,
        "thread_id": anything,
        "session_key": anything.filter(bool),
        "occurred_at": time_inputs,
    },
)
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([MAX_CONTEXT_WINDOW, MAX_CONTEXT_WINDOW + 1, INT32_MAX, INT32_MAX + 1, 1e30]),
)
people = st.text(st.characters(codec=None), min_size=1, max_size=8)
peers = st.builds(lambda channel, peer: f"{channel}:{peer}", st.sampled_from(["telegram", "slack"]), people)
configs = st.fixed_dictionaries(
    {},
    optional={
        "context_window": numbers,
        "compaction": st.fixed_dictionaries(
            {}, optional={"reserve_tokens": numbers, "soft_threshold_tokens": numbers, "max_transcript_bytes": numbers}
        ),
        "reset": st.fixed_dictionaries(
            {"mode": st.just("idle")}, optional={"idle_minutes": numbers, "at_hour": numbers}
        ),
        "retention": st.fixed_dictionaries({}, optional={"dormant_after_days": numbers}),
        "identity_links": st.dictionaries(people, st.lists(peers, max_size=40), max_size=5),
    },
)
PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _accepted(model: type[Any], body: dict[str, Any]) -> Any | None:
    try:
        return model.model_validate(body)
    except ValidationError:
        return None


@PROPERTY
@given(messages)
def test_every_accepted_message_is_storable_by_the_session_service(body: dict[str, Any]) -> None:
    message = _accepted(InboundMessage, body)
    if message is None:
        return
    for name in ("text", "peer_id", "message_id", "sender_name", "account_id", "chat_id", "thread_id", "session_key"):
        value = getattr(message, name)
        assert value is None or storable_text(value), name
        controls = {c for c in value or "" if unicodedata.category(c) == "Cc"}
        assert controls <= ({"\t", "\n", "\r"} if name == "text" else set()), name
    if message.occurred_at is not None:
        assert storable_time(message.occurred_at)
        assert MIN_YEAR <= message.occurred_at.astimezone(UTC).year <= MAX_YEAR
    # what ingest publishes decodes again on the other side (the session service's own validation)
    event = MessageReceived(
        tenant_id="9c62dcb2-58bd-4e16-8e04-33e2f4213aab",
        session_key=message.session_key or "agent:main:main",
        occurred_at=message.occurred_at or datetime.now(UTC),
        message=message,
    )
    assert decode_event(event.model_dump_json()) == event


@PROPERTY
@given(configs)
def test_every_accepted_agent_config_is_applicable_by_the_session_service(body: dict[str, Any]) -> None:
    config = _accepted(AgentConfig, body)
    if config is None:
        return
    window = config.context_window
    assert window is None or 1000 <= window <= INT32_MAX  # session.agent_settings.context_window is int
    policy = config.reset
    assert timedelta(minutes=policy.idle_minutes)  # the session service's idle test, without OverflowError
    for days in (config.retention.dormant_after_days, config.retention.archive_after_days):
        assert days is None or timedelta(days=days) > timedelta(0)  # an interval that is not zero
    for person, addresses in config.identity_links.items():
        assert storable_text(person)
        assert all(storable_text(a) for a in addresses)
    announced = AgentConfigured(tenant_id="9c62dcb2-58bd-4e16-8e04-33e2f4213aab", version=1, config=config)
    assert len(announced.model_dump_json()) < NATS_MAX_PAYLOAD
    assert "\\u0000" not in json.dumps(config.model_dump(mode="json"))  # jsonb refuses \u0000


@PROPERTY
@given(time_inputs)
def test_an_accepted_time_is_an_instant_postgres_stores_as_itself(value: Any) -> None:
    message = _accepted(InboundMessage, {"text": "x", "occurred_at": value})
    if message is not None:
        assert isinstance(value, str)  # never an epoch, never a naive datetime
        assert storable_time(message.occurred_at)


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("1900-01-01T00:00:00Z", True),
        ("1900-01-01T08:00:00+08:00", True),
        ("9999-12-31T23:59:59Z", True),
        ("9999-12-31T23:59:59.999998Z", True),
        ("9999-12-31T23:59:59.999999Z", False),  # asyncpg's `infinity`
        ("0001-01-01T00:00:00Z", False),  # asyncpg's `-infinity`
        ("1899-12-31T23:59:59Z", False),
        ("1900-01-01T00:00:00+00:01", False),  # 1899 in UTC
        ("9999-12-31T23:59:59-14:00", False),  # year 10000 in UTC
        ("2026-11-29T09:30:00", False),  # no offset
        ("2026-11-29", False),
        ("1764408600", False),
        (1764408600, False),
        (1764408600.5, False),
    ],
)
def test_times_are_rfc3339_within_years_1900_to_9999_in_utc(value: Any, accepted: bool) -> None:
    assert (_accepted(InboundMessage, {"text": "x", "occurred_at": value}) is not None) == accepted


@pytest.mark.parametrize(
    ("field", "value", "accepted"),
    [
        ("text", "tab\tline\nreturn\r emoji 🦀 下周二我去上海", True),
        ("text", "nul\x00", False),
        ("text", "escape \x1b[31m", False),
        ("text", "lone \ud800 surrogate", False),
        ("text", "pair \U0001f980 (a surrogate pair in UTF-16, one code point here)", True),
        ("peer_id", "U1 🦀", True),
        ("peer_id", "tab\tpeer", False),
        ("peer_id", "c1\x85", False),
        ("sender_name", "Ada\nLovelace", False),
        ("message_id", "\udfff", False),
    ],
)
def test_names_refuse_every_control_and_text_keeps_tab_and_line_breaks(field: str, value: str, accepted: bool) -> None:
    assert (_accepted(InboundMessage, {"text": "x", field: value}) is not None) == accepted


def test_a_refusal_names_the_character_and_where_it_is() -> None:
    with pytest.raises(ValidationError) as raised:
        InboundMessage.model_validate({"text": "ab\x00", "peer_id": "\ud800"})
    errors = {e["loc"]: e["msg"] for e in raised.value.errors()}
    assert errors == {
        ("text",): "must not contain a control character (U+0000) at character 3; only tab, line feed and carriage "
        "return are allowed",
        ("peer_id",): "must not contain a lone surrogate (U+D800) at character 1; send text as valid UTF-8",
    }


@pytest.mark.parametrize(
    ("body", "location", "limit"),
    [
        ({"context_window": 1e30}, ("context_window",), "100000000"),
        ({"context_window": INT32_MAX + 1}, ("context_window",), "100000000"),
        ({"compaction": {"max_transcript_bytes": 2**40}}, ("compaction", "max_transcript_bytes"), "1073741824"),
        ({"reset": {"mode": "idle", "idle_minutes": 10**12}}, ("reset", "idle_minutes"), "527040"),
        ({"retention": {"dormant_after_days": 1e300}}, ("retention", "dormant_after_days"), "36600"),
        ({"identity_links": {"ann": [f"telegram:{i}" for i in range(33)]}}, ("identity_links", "ann"), "32"),
        ({"identity_links": {f"p{i}": [f"telegram:{i}"] for i in range(1001)}}, ("identity_links",), "1000"),
        (
            {"identity_links": {f"p{i}": [f"telegram:{i}-{j}" for j in range(32)] for i in range(63)}},
            ("identity_links",),
            "2000",
        ),
        (
            {"identity_links": {f"p{i}": [f"telegram:{'😀' * 250}{j}" for j in range(30)] for i in range(10)}},
            ("identity_links",),
            "262144",
        ),
    ],
)
def test_every_number_and_collection_of_agent_config_has_an_upper_bound(
    body: dict[str, Any], location: tuple[str, ...], limit: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        AgentConfig.model_validate(body)
    [error] = raised.value.errors()
    assert error["loc"] == location
    assert limit in error["msg"]


def test_the_largest_accepted_config_fits_in_one_nats_message() -> None:
    links = {f"p{i:03d}": tuple(f"telegram:{'😀' * 200}{i}-{j}" for j in range(2)) for i in range(160)}
    config = AgentConfig.model_validate({"context_window": MAX_CONTEXT_WINDOW, "identity_links": links})
    announced = AgentConfigured(tenant_id="9c62dcb2-58bd-4e16-8e04-33e2f4213aab", version=1, config=config)
    assert len(announced.model_dump_json()) < NATS_MAX_PAYLOAD
