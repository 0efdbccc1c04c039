"""Which rate a request counts against, and a tenant's limits merged over the deployment's defaults."""

import datetime

import pytest

from cairn.edge.rate_limiter import bucket, seconds_to_midnight
from cairn.edge.settings import LimitSettings
from cairn.edge.tenant_limits import LimitOverride, RequestRates, adds_document, effective_limits, request_class


@pytest.mark.parametrize(
    ("method", "path", "kind"),
    [
        ("POST", "/v1/messages", "write"),
        ("POST", "/v1/messages/batch", "write"),
        ("POST", "/v1/sessions/agent:main:main/reset", "write"),
        ("PUT", "/v1/memory/files/MEMORY.md", "write"),
        ("POST", "/v1/sessions/search", "search"),
        ("POST", "/v1/memory/search", "search"),
        ("GET", "/v1/sessions/agent:main:main/history", "search"),
        ("GET", "/v1/agents/main/config", "search"),
        ("POST", "/v1/recall", "recall"),
        ("GET", "/v1/recall/traces/abc", "search"),
        ("GET", "/v1/usage", "admin"),
        ("POST", "/v1/keys", "admin"),
    ],
)
def test_request_class(method: str, path: str, kind: str) -> None:
    assert request_class(method, path) == kind


def test_memory_file_writes_may_add_a_document_and_deletes_do_not() -> None:
    assert adds_document("PUT", "/v1/memory/files/notes/a.md")
    assert adds_document("POST", "/v1/memory/daily")
    assert not adds_document("DELETE", "/v1/memory/files/notes/a.md")
    assert not adds_document("POST", "/v1/messages")


def test_an_override_keeps_the_defaults_of_what_it_leaves_out() -> None:
    defaults = LimitSettings(write_per_s=100, search_per_s=50, key_share=0.5, messages_per_day=1000)
    override = LimitOverride(requests_per_s=RequestRates(search=4), messages_per_day=10)
    limits = effective_limits(defaults, override)
    assert (limits.requests_per_s.write, limits.requests_per_s.search) == (100, 4)
    assert (limits.key_requests_per_s.write, limits.key_requests_per_s.search) == (50, 2)
    assert limits.messages_per_day == 10
    assert limits.stored_bytes == defaults.stored_bytes
    assert effective_limits(defaults, None).requests_per_s.search == 50


def test_an_explicit_key_rate_is_not_scaled() -> None:
    override = LimitOverride(key_requests_per_s=RequestRates(write=3))
    assert effective_limits(LimitSettings(key_share=0.5), override).key_requests_per_s.write == 3


def test_a_bucket_holds_at_least_one_request_and_shares_its_tenants_hash_tag() -> None:
    slow = bucket("t1", "write", "w", 0.01, 1.0)
    assert slow.capacity == 1
    assert bucket("t1", "write", "w", 0.01, 300).capacity == 3
    assert slow.key == "cairn:rate:{t1}:write"


def test_the_daily_quota_resets_at_utc_midnight() -> None:
    now = datetime.datetime(2026, 12, 6, 23, 59, 30, tzinfo=datetime.UTC)
    assert seconds_to_midnight(now) == 30
