"""API keys (random, prefixed, stored only as a SHA-256 digest) and the message dedup id."""

import hashlib
import re

from cairn.ingest.domain import KEY_PREFIX, message_dedup_id, new_api_key
from cairn.platform.auth import hash_key


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
