"""Secret redaction and redacted snippets: every secret kind masked, ordinary text left alone."""

import random
import re
import string

import pytest

from cairn.text import mask, redact, redaction, snippet

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
OPENAI = "sk-proj-Abc123Def456Ghi789Jkl012Mno345Pqr678"
GITHUB = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
TELEGRAM = "123456789:AAH" + "q7Xz" * 8
PEM_BODY = "MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2Xqn\nb8ZzV1rQ0wQk8s1y5mX0f1Kc9+Zr2uQ7lN0pYvJh\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"Authorization: Bearer {JWT}", "Authorization: Bearer eyJhbG…sR8U"),
        ("authorization: bearer abc123", "authorization: bearer ***"),
        ('{"Authorization": "Basic dXNlcjpwYXNzd29yZA=="}', '{"Authorization": "Basic dXNlcj…ZA=="}'),
        (f"curl -H 'Bearer {OPENAI}'", "curl -H 'Bearer sk-pro…r678'"),
        (f"OPENAI_API_KEY={OPENAI}", "OPENAI_API_KEY=sk-pro…r678"),
        ("db_password=hunter2", "db_password=***"),
        ("export GITHUB_TOKEN='abc'", "export GITHUB_TOKEN='***'"),
        ("Client_Secret: s3cr3t-value", "Client_Secret: ***"),
        ("x-api-key: 0123456789abcdef0123", "x-api-key: 012345…0123"),
        ('{"api_key": "k-123", "password": "pw", "token": "t0k3n", "secret": "shh"}', None),
        ('{"password":"p\\"w"}', '{"password":"***"}'),
        (OPENAI, "sk-pro…r678"),
        (GITHUB, "ghp_A1…Q7r8"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github…wxyz"),
        ("slack xoxb-1234567890-abcdefghijkl done", "slack xoxb-1…ijkl done"),
        ("AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "AIzaSy…5p6Q"),
        ("gsk_" + "a1B2" * 13, "gsk_a1…a1B2"),
        ("pplx-" + "Z9y8" * 12, "pplx-Z…Z9y8"),
        ("npm_" + "Q1w2" * 9, "npm_Q1…Q1w2"),
        (f"bot {TELEGRAM} ok", "bot 123456…q7Xz ok"),
        ("card 4111 1111 1111 1111 thanks", "card 4111 1…1111 thanks"),
        ("card 4111111111111111", "card ***"),
        ("amex 3782-822463-10005.", "amex ***."),
        ("mc 5555-5555-5555-4444", "mc 5555-5…4444"),
    ],
)
def test_secret_is_masked(text: str, expected: str | None) -> None:
    redacted = redact(text)
    if expected is None:
        assert redacted == '{"api_key": "***", "password": "***", "token": "***", "secret": "***"}'
    else:
        assert redacted == expected


@pytest.mark.parametrize("kind", ["RSA ", "OPENSSH ", "EC ", "", "ENCRYPTED "])
def test_pem_private_key_body_is_replaced(kind: str) -> None:
    block = f"-----BEGIN {kind}PRIVATE KEY-----\n{PEM_BODY}-----END {kind}PRIVATE KEY-----"
    redacted = redact(f"key:\n{block}\nthanks")
    assert redacted == f"key:\n-----BEGIN {kind}PRIVATE KEY-----\n***\n-----END {kind}PRIVATE KEY-----\nthanks"


def test_pem_block_cut_before_its_end_is_masked_to_the_end() -> None:
    redacted = redact(f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}")
    assert redacted == "-----BEGIN RSA PRIVATE KEY-----\n***"


@pytest.mark.parametrize(
    "text",
    [
        "The key to success is patience; tokens are cheap.",
        "max_tokens=1000 temperature=0.2 token_count: 12 password_hint: pet name",
        "the bearer of bad news",
        "monkey=3, keyboard=us",
        "if token == expected:",
        "pip install scikit-learn; task-1234567890abcdefghij",
        "id 550e8400-e29b-41d4-a716-446655440000 on 2026-11-30",
        "call +1 415-555-0132 or 020 7946 0958",
        "上海的发布会 ERR_CONN_RESET",
        "",
    ],
)
def test_non_secret_is_left_alone(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("digits", ["4111 1111 1111 1112", "1234567812345678", "1234567890123", "12345678901234567890"])
def test_luhn_invalid_digit_runs_are_left_alone(digits: str) -> None:
    assert redact(f"order {digits}") == f"order {digits}"


def test_mask_keeps_ends_only_from_eighteen_chars() -> None:
    assert mask("a" * 17) == "***"
    assert mask("abcdef" + "x" * 8 + "wxyz") == "abcdef…wxyz"


def _long_text() -> str:
    return " ".join(f"w{index:03}" for index in range(100)) + " Needle " + " ".join("z" * 4 for _ in range(100))


def test_snippet_of_short_text_is_whole_and_redacted() -> None:
    assert snippet("pw: DB_PASSWORD=hunter2", ["pw"], 300) == "pw: DB_PASSWORD=***"


def test_snippet_is_centred_on_first_hit_case_insensitively() -> None:
    text = _long_text()
    cut = snippet(text, ["absent", "needle"], 41)
    assert len(cut) == 41
    assert cut.startswith("…")
    assert cut.endswith("…")
    assert abs(cut.index("Needle") + 3 - 20) <= 1


def test_snippet_prefers_the_earliest_hit() -> None:
    cut = snippet("alpha " * 50 + "beta " + "gamma " * 50, ["gamma", "beta"], 30)
    assert "beta" in cut


def test_snippet_without_hit_starts_at_the_beginning() -> None:
    cut = snippet(_long_text(), ["missing"], 20)
    assert cut == _long_text()[:19] + "…"


def test_snippet_near_the_end_keeps_the_end() -> None:
    text = _long_text() + " tail"
    cut = snippet(text, ["tail"], 25)
    assert cut == "…" + text[-24:]


@pytest.mark.parametrize("max_chars", range(0, 60))
def test_snippet_never_exceeds_max_chars(max_chars: int) -> None:
    for term in ("w000", "needle", "zzzz", "w050", "nothing"):
        assert len(snippet(_long_text(), [term], max_chars)) <= max_chars


def test_snippet_never_shows_part_of_a_secret() -> None:
    text = "x " * 100 + f"my token is {OPENAI} and the key " + "y " * 100
    for max_chars in range(5, 80):
        cut = snippet(text, ["token"], max_chars)
        assert "Def456" not in cut
        assert "Abc123Def" not in cut


def _redact_every_pattern(text: str) -> str:
    """What `redact` did before it skipped patterns by their words: every substitution, in the same order."""
    from cairn.text import redaction as r

    text = r._PEM.sub(r._mask_pem, text)
    text = r._AUTHORIZATION.sub(r._masker("value", "raw", "bare"), text)
    text = r._ASSIGNMENT.sub(r._masker("dq", "sq", "value"), text)
    text = r._PREFIXED.sub(r._masker("value"), text)
    text = r._TELEGRAM.sub(r._masker("value"), text)
    return r._CARD.sub(r._mask_card, text)


def test_skipping_patterns_without_their_words_changes_nothing() -> None:
    """`redact` runs the authorization, assignment and PEM patterns only on text holding words they need; on
    generated chat, every secret kind above, upper/lower/mixed case and Unicode letters that match ASCII ones
    case-insensitively (Kelvin sign, long s), the result is the same as running every pattern."""
    import random

    from cairn.cli.chatgen import chat_text

    rng = random.Random(4)
    secrets = [
        f"Authorization: Bearer {JWT}", "AUTHORIZATION=Basic dXNlcjpwYXNzd29yZA==", f"BEARER {OPENAI}",
        f"OPENAI_API_KEY={OPENAI}", "db_password=hunter2", "DB_PASSWD: 'x y'", 'PassPhrase: "a\\"b"',
        "my-pwd=abc", "x-api-\u212aey: 0123456789abcdef0123", "pa\u017f\u017fword=hunter2", "\u017fecret: s3",
        "Client_Secret: s3cr3t-value", "export GITHUB_TOKEN='abc'", GITHUB, TELEGRAM, "card 4111 1111 1111 1111",
        f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}", "token:", "key=", "=:", "bearer", "a\u212aey=1",
    ]  # fmt: skip
    texts = [chat_text(rng) for _ in range(1500)] + secrets
    for _ in range(1500):  # chat with secrets, keywords and separators spliced in
        parts = [chat_text(rng), rng.choice(secrets), rng.choice(["", " ", "=", ": ", "\n"]), chat_text(rng)]
        rng.shuffle(parts)
        texts.append("".join(parts))
    masked = 0
    for text in texts:
        expected = _redact_every_pattern(text)
        assert redact(text) == expected, text
        masked += expected != text
    assert masked >= 1000, "most spliced secrets were masked (the comparison saw real work)"


_PIECES = [
    "the key to it", "monkey: 3", "keyboard=us", "max_tokens=1000", "token_count: 12", "passed: yes", "a pass: b",
    "User: hello", "Assistant: sure", "db_password=hunter2", "DB_PASSWORD = 'x'", 'API_KEY  "= v', "my_api_key\t:\tv",
    '{"token": "t0k3n"}', "'secret':'shh'", "client_secret:   s3cr3t-value", "x-api-key: 0123456789abcdef0123",
    "paſsword=hunter2", "PAſSWORD: ſecretvalue", "my_KEY=abc", "my_\u212aey=abcdef", "TO\u212aEN: v", "pwd:x",
    "authorization: bearer abc123", "AUTHORİZATİON: Basic dXNlcjpwYXNzd29yZA==", "Bearer " + "A" * 25, "beareR   x",
    OPENAI, GITHUB, JWT, TELEGRAM, "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "xoxb-1234567890-ab",
    "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "gsk_" + "a1B2" * 13, "pplx-" + "Z9y8" * 12, "npm_" + "Q1w2" * 9,
    "glpat-" + "x" * 20, "sk_live_" + "a" * 16, "rk_test_" + "b" * 16, "4111 1111 1111 1111", "4111111111111111",
    "3782-822463-10005", "1234567890123", "٤١١١١١١١١١١١١١١١", "١٢٣٤٥٦٧٨٩:" + "q7Xz" * 9, "12345678:" + "a" * 35,
    "2026-11-30 12:00", "call +1 415-555-0132", "-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY,
    "-----END RSA PRIVATE KEY-----",
    "上海的发布会 ERR_CONN_RESET", "naïve café", "=", ":", "'", '"', " " * 70, "\n", "password", "key", "secret:", " =",
]  # fmt: skip


def test_redact_equals_every_pattern_run_over_the_whole_text() -> None:
    """The cheap looks only skip patterns that could not match: the result is the same on texts that mix
    secrets of every kind, names with case-folded letters, separators after long whitespace and any-script digits."""
    rng = random.Random(7)
    for _ in range(3000):
        text = rng.choice(["", " ", "\n", "; "]).join(rng.choice(_PIECES) for _ in range(rng.randint(1, 8)))
        assert redact(text) == _redact_every_pattern(text), text


def test_the_looks_in_lower_case_miss_no_letter_the_patterns_fold() -> None:
    """Every character that the patterns' case-insensitive matching takes for an ASCII letter is that letter in
    the text the looks read (`_fold`)."""
    letters = re.compile("(?i)[a-z]")
    for code in range(0x80, 0x110000):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF or not letters.fullmatch(char):
            continue
        letter = next(ascii for ascii in string.ascii_lowercase if re.fullmatch(f"(?i){ascii}", char))
        assert redaction._fold(char) == letter, hex(code)
