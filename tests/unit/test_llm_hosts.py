"""Where a tenant's model override may point (cairn.llm.hosts): the parsed host must be on the operator's
allow-list, whatever tricks the URL's text plays; and how the `CAIRN_LLM_*` settings are read."""

import pytest

from cairn.llm import LlmSettings, canonical_host, override_refusal

ALLOWED = ["llm.internal", "10.0.0.7", "[fd00::7]", "Models.Example.COM."]


@pytest.mark.parametrize(
    "url",
    [
        "http://llm.internal/v1",
        "https://llm.internal:8443/v1",
        "HTTP://LLM.INTERNAL/v1",
        "http://llm.internal./v1",
        "http://10.0.0.7:11434/v1",
        "http://[fd00::7]:8080/v1",
        "http://[fd00:0:0::7]/v1",
        "https://models.example.com/openai/v1",
    ],
)
def test_a_listed_host_is_allowed(url: str) -> None:
    assert override_refusal(url, ALLOWED) is None


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("http://llm.internal@169.254.169.254/", "user name or password"),
        ("http://llm.internal:pw@169.254.169.254/v1", "user name or password"),
        ("http://169.254.169.254#llm.internal", "query or a fragment"),
        ("http://169.254.169.254/?host=llm.internal", "query or a fragment"),
        ("http://169.254.169.254/v1", "allow-list"),
        ("http://llm.internal.evil.example/v1", "allow-list"),
        ("http://evil.example/llm.internal", "allow-list"),
        ("http://[::ffff:169.254.169.254]/v1", "allow-list"),
        ("http://[fd00::8]/v1", "allow-list"),
        ("http://2852039166/v1", "allow-list"),  # 169.254.169.254 as one decimal number
        ("http://llm.internal\\@169.254.169.254/", "backslashes"),
        ("http://llm.internal /v1", "spaces"),
        ("ftp://llm.internal/v1", "http or https"),
        ("file:///etc/passwd", "http or https"),
        ("llm.internal/v1", "http or https"),
        ("http:///v1", "name a host"),
        ("http://llm.internal:99999/v1", "valid URL"),
        ("http://[fd00::7/v1", "valid URL"),
        ("http://\udc80.llm.internal/v1", "valid URL"),
        ("http://%6c%6c%6d.internal/v1", "allow-list"),  # llm.internal, percent-encoded
        ("http://llm.internal%2f@169.254.169.254/", "user name or password"),
        ("http://bücher.llm.internal/v1", "every URL parser"),
    ],
)
def test_anything_else_is_refused_naming_the_rule(url: str, rule: str) -> None:
    refusal = override_refusal(url, ALLOWED)
    assert refusal is not None
    assert rule in refusal, refusal
    assert refusal.startswith("must")


def test_an_empty_allow_list_allows_no_override() -> None:
    refusal = override_refusal("http://llm.internal/v1", [])
    assert refusal is not None
    assert "empty" in refusal
    assert override_refusal("http://llm.internal/v1", ["", " "]) is not None


def test_hosts_compare_in_canonical_form() -> None:
    assert canonical_host("LLM.Internal.") == "llm.internal"
    assert canonical_host("[0:0::1]") == "::1"
    assert canonical_host("010.0.0.7") == "010.0.0.7"  # not an IP to Python: compared as a name, never matched


def test_settings_read_a_comma_separated_allow_list_and_empty_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_LLM_ALLOWED_HOSTS", " llm.internal, 10.0.0.7 ,,")
    monkeypatch.setenv("CAIRN_LLM_BASE_URL", "")
    monkeypatch.setenv("CAIRN_LLM_MODEL", "qwen3")
    monkeypatch.setenv("CAIRN_LLM_API_KEY", "")
    settings = LlmSettings()
    assert settings.allowed_hosts == ["llm.internal", "10.0.0.7"]
    assert settings.base_url is None
    assert settings.api_key is None
    assert not settings.configured
    monkeypatch.setenv("CAIRN_LLM_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("CAIRN_LLM_ALLOWED_HOSTS", '["a.example"]')
    configured = LlmSettings()
    assert configured.configured
    assert configured.allowed_hosts == ["a.example"]
    assert configured.timeout_s == 30.0
