"""API keys (random, prefixed, stored only as a SHA-256 digest), the message dedup id, message limits and
session keys."""

import hashlib
import re

import pytest

from cairn.edge.auth import hash_key
from cairn.events import InboundMessage
from cairn.ingest.api import oversized_text
from cairn.ingest.domain import (
    KEY_PREFIX,
    Refusal,
    console_thread_key,
    message_dedup_id,
    new_api_key,
    refusal,
    session_key_problem,
    text_too_large,
)


def test_new_keys_are_random() -> None:
    secrets = {new_api_key().secret for _ in range(100)}
    assert len(secrets) == 100


def test_key_is_prefixed_url_safe_and_long_enough() -> None:
    key = new_api_key()
    assert KEY_PREFIX == "ck_"
    assert re.fullmatch(r"ck_[A-Za-z0-9_-]{43}", key.secret)  # 32 random bytes, base64url


def test_digest_is_sha256_of_the_secret_and_hash_key_agrees() -> None:
    key = new_api_key()
    assert key.digest == hashlib.sha256(key.secret.encode()).digest()
    assert hash_key(key.secret) == key.digest
    assert len(key.digest) == 32
    assert key.secret.encode() not in key.digest


def test_prefix_is_the_start_of_the_secret_and_reveals_little() -> None:
    key = new_api_key()
    assert key.prefix == key.secret[:10]
    assert key.prefix.startswith("ck_")
    assert len(key.prefix) == 10


def test_hash_key_differs_for_different_secrets() -> None:
    assert hash_key("ck_a") != hash_key("ck_b")


def test_message_dedup_id_shape() -> None:
    assert message_dedup_id("t-1", "telegram", "tg-99812") == "t-1:telegram:tg-99812"


def test_message_dedup_id_separates_channels_and_tenants() -> None:
    ids = {
        message_dedup_id("t-1", "telegram", "42"),
        message_dedup_id("t-1", "discord", "42"),
        message_dedup_id("t-2", "telegram", "42"),
    }
    assert len(ids) == 3


def _message(text: str = "hi", **fields: object) -> InboundMessage:
    return InboundMessage.model_validate({"text": text, **fields})


def test_text_within_the_byte_limit_is_accepted_and_one_byte_more_is_413() -> None:
    assert refusal(_message("x" * 100), max_text_bytes=100) is None
    refused = refusal(_message("x" * 101), max_text_bytes=100)
    assert refused == Refusal(413, "text", "text is 101 bytes in UTF-8; the limit is 100 bytes")


def test_the_limit_counts_utf8_bytes_not_characters() -> None:
    assert refusal(_message("上" * 33), max_text_bytes=100) is None  # 99 bytes
    refused = refusal(_message("上" * 34), max_text_bytes=100)  # 102 bytes in 34 characters
    assert refused is not None
    assert refused.status == 413


def test_the_models_character_limit_is_reported_when_it_is_the_one_hit() -> None:
    assert text_too_large(70_000, 70_000, 65_536) == "text is 70000 bytes in UTF-8; the limit is 65536 bytes"
    assert text_too_large(70_000, 70_000, 100_000) == "text is 70000 characters; the limit is 65536 characters"


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("agent:main:dashboard:1", None),
        ("cron:nightly-digest", None),
        ("agent:main:main", None),
        ("k" * 512, None),
        ("k" * 513, "session_key is 513 characters; the limit is 512"),
        ("agent:main: main", "session_key must not contain whitespace or control characters"),
        ("agent:main:main\n", "session_key must not contain whitespace or control characters"),
        ("agent:main:\tmain", "session_key must not contain whitespace or control characters"),
        ("agent:main:\x00", "session_key must not contain whitespace or control characters"),
        ("agent:main:\u3000", "session_key must not contain whitespace or control characters"),
    ],
    ids=["console", "cron", "main", "512", "513", "space", "newline", "tab", "nul", "ideographic-space"],
)
def test_session_key_problems(key: str, problem: str | None) -> None:
    assert session_key_problem(key) == problem


def test_a_bad_explicit_session_key_is_422_naming_it() -> None:
    refused = refusal(_message(session_key="agent:main: x"), max_text_bytes=65_536)
    assert refused is not None
    assert (refused.status, refused.field) == (422, "session_key")


def test_console_thread_keys_are_new_uuids_under_the_agent() -> None:
    keys = {console_thread_key("ops") for _ in range(50)}
    assert len(keys) == 50
    assert all(re.fullmatch(r"agent:ops:dashboard:[0-9a-f-]{36}", key) for key in keys)


def test_an_oversized_text_alone_is_413_and_with_other_problems_stays_422() -> None:
    too_long = {"type": "string_too_long", "loc": ("body", "text"), "input": "x" * 70_000}
    problem = oversized_text([too_long], 65_536)
    assert problem is not None
    assert (problem.status, problem.errors) == (
        413, [{"field": "text", "message": "text is 70000 bytes in UTF-8; the limit is 65536 bytes"}],
    )  # fmt: skip
    assert oversized_text([too_long, {"type": "literal_error", "loc": ("body", "role")}], 65_536) is None
    assert oversized_text([{**too_long, "loc": ("body", "sender_name")}], 65_536) is None
