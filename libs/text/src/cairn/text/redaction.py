"""Masks secrets in text before it leaves cairn in history pages, search hits and snippets.

Patterns are deliberately specific (header names, assignment names, vendor prefixes, Luhn-checked
card numbers) so ordinary prose survives; a missed secret is worse than a masked word, so where a
shape is clearly a credential the whole value is masked.
"""

import re
from collections.abc import Callable, Sequence

_SHORT = 18
"""Values shorter than this are masked entirely: showing 10 of 17 characters would leak too much."""

_PEM = re.compile(
    r"(?P<begin>-----BEGIN (?P<kind>[A-Z0-9 ]*?)PRIVATE KEY( BLOCK)?-----)"
    r"(?P<value>.*?)"
    r"(?P<end>-----END (?P=kind)PRIVATE KEY( BLOCK)?-----|\Z)",
    re.DOTALL,
)
_TOKEN_CHARS = r"[A-Za-z0-9._~+/-]"
_AUTHORIZATION = re.compile(
    rf"(?i)\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?"
    rf"(?:(?:bearer|basic|token|digest)\s+(?P<value>{_TOKEN_CHARS}+=*)|(?P<raw>{_TOKEN_CHARS}{{16,}}=*))"
    rf"|\bbearer\s+(?P<bare>{_TOKEN_CHARS}{{20,}}=*)"
)
# env (MY_API_KEY=…), YAML (password: …) and JSON ("token": "…") assignments of secret-named fields.
_ASSIGNMENT = re.compile(
    r"(?i)\b(?:(?:[a-z0-9]+[_-])+key|(?:[a-z0-9]+[_-])*"
    r"(?:apikey|token|secret|password|passwd|passphrase|pwd))\b[\"']?\s*[=:]\s*"
    r"(?:\"(?P<dq>(?:[^\"\\\n]|\\.)+)\"|'(?P<sq>[^'\n]+)'|(?P<value>[^\s\"',;}\]=][^\s\"',;}\]]*))"
)
_PREFIXED = re.compile(
    r"(?<![\w-])(?P<value>"
    r"sk-[A-Za-z0-9_-]{16,}|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{30,}"
    r"|gsk_[A-Za-z0-9]{20,}|pplx-[A-Za-z0-9]{20,}|npm_[A-Za-z0-9]{30,}|glpat-[A-Za-z0-9_-]{20,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
)
_TELEGRAM = re.compile(r"(?<![\w-])(?P<value>\d{8,10}:[A-Za-z0-9_-]{35})(?![\w-])")
_CARD = re.compile(r"(?<!\d)(?P<value>\d(?:[ -]?\d){12,18})(?![\d])")
_NON_DIGIT = re.compile(r"\D")


def mask(value: str) -> str:
    """Short values vanish; long ones keep enough of both ends to tell which key it was."""
    if len(value) < _SHORT:
        return "***"
    return f"{value[:6]}…{value[-4:]}"


def redact(text: str) -> str:
    """The text with every recognised secret masked; everything else is left byte for byte.

    Each pattern runs only when a cheap look (substrings, separators, a digit count) finds what every one of
    its matches contains: the patterns cost ~1 ms per 3 KB each and most text holds nothing they need, and a
    look that can miss nothing the pattern matches gives exactly the pattern's result.
    """
    if "-----BEGIN " in text:
        text = _PEM.sub(_mask_pem, text)
    folded = _fold(text)
    if "authorization" in folded or "bearer" in folded:
        text = _AUTHORIZATION.sub(_masker("value", "raw", "bare"), text)
    if _may_assign(text):
        text = _ASSIGNMENT.sub(_masker("dq", "sq", "value"), text)
    if any(prefix in text for prefix in _PREFIXES):
        text = _PREFIXED.sub(_masker("value"), text)
    digits = _digits(text)
    if digits >= 8 and ":" in text:
        text = _TELEGRAM.sub(_masker("value"), text)
    if digits >= 13:
        text = _CARD.sub(_mask_card, text)
    return text


# The characters other than A-Z that the patterns' case-insensitive matching takes for an ASCII letter (Python's
# `re` folds İ and ı to i, ſ to s, the Kelvin sign to k), so that the looks in lower case miss none of them.
_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})
_FOLDED = "\u0130\u0131\u017f\u212a"
_NAMES = ("key", "token", "secret", "password", "passwd", "passphrase", "pwd")  # how an _ASSIGNMENT name ends
# The literal start of every _PREFIXED alternative.
_PREFIXES = ("sk-", "sk_", "rk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "AIza", "pplx-",
             "npm_", "glpat-", "eyJ")  # fmt: skip
_DIGIT = re.compile(r"\d")
_LOOK_BACK = 64


def _fold(text: str) -> str:
    if text.isascii() or not any(char in text for char in _FOLDED):
        return text.lower()
    return text.translate(_FOLD).lower()


def _may_assign(text: str) -> bool:
    """Whether a secret-named field's separator is anywhere: a `=` or `:` after a name ending as _NAMES do,
    an optional quote and whitespace (what every _ASSIGNMENT match holds)."""
    for separator in "=:":
        start = text.find(separator)
        while start >= 0:
            before = text[max(start - _LOOK_BACK, 0) : start].rstrip()
            if not before and start > _LOOK_BACK:
                return True  # a long run of whitespace: let the pattern decide
            if before[-1:] in ('"', "'"):
                before = before[:-1]
            if _fold(before[-len("passphrase") :]).endswith(_NAMES):
                return True
            start = text.find(separator, start + 1)
    return False


def _digits(text: str) -> int:
    """How many decimal digits the text holds (`\\d`: any script's)."""
    if text.isascii():
        return sum(map(text.count, "0123456789"))
    return len(_DIGIT.findall(text))


def snippet(text: str, terms: Sequence[str], max_chars: int) -> str:
    """At most ``max_chars`` of redacted text centred on the first term found, ``…`` at cut ends.

    Redacting first means a cut can never expose the half of a secret that a mask would have hidden.
    """
    text = redact(text)
    if len(text) <= max_chars:
        return text
    if max_chars < 3:
        return text[: max(max_chars - 1, 0)] + "…"[:max_chars]
    centre = _first_hit_centre(text, terms)
    width = max_chars - 2
    start = min(max(centre - width // 2, 0), len(text) - width)
    if start <= 1:
        return text[: max_chars - 1] + "…"
    if start + width >= len(text) - 1:
        return "…" + text[len(text) - max_chars + 1 :]
    return "…" + text[start : start + width] + "…"


def _first_hit_centre(text: str, terms: Sequence[str]) -> int:
    """Centre of the earliest case-insensitive hit (longest term wins a tie), or 0 without one."""
    needles = sorted({term for term in terms if term}, key=len, reverse=True)
    if not needles:
        return 0
    hit = re.search("|".join(map(re.escape, needles)), text, re.IGNORECASE)
    return 0 if hit is None else (hit.start() + hit.end()) // 2


def _masker(*groups: str) -> Callable[[re.Match[str]], str]:
    """A substitution that masks whichever of ``groups`` matched and keeps the rest of the match."""

    def replace(match: re.Match[str]) -> str:
        group = next(name for name in groups if match[name] is not None)
        start, end = match.span(group)
        whole = match.string
        return whole[match.start() : start] + mask(match[group]) + whole[end : match.end()]

    return replace


def _mask_pem(match: re.Match[str]) -> str:
    """The whole key body goes, even for a block cut off before its END line."""
    return f"{match['begin']}\n***\n{match['end']}" if match["end"] else f"{match['begin']}\n***"


def _mask_card(match: re.Match[str]) -> str:
    """Only Luhn-valid runs are cards; order numbers and timestamps mostly fail the checksum."""
    value = match["value"]
    return mask(value) if _luhn_valid(_NON_DIGIT.sub("", value)) else value


def _luhn_valid(digits: str) -> bool:
    """The Luhn checksum every payment card number satisfies."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        digit = int(char) * (2 if index % 2 else 1)
        total += digit - 9 if digit > 9 else digit
    return total % 10 == 0
