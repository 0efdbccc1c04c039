"""Explicit "remember …" statements, found by rules without a model: a small table of phrases per language.

A statement is a request to keep something, not a mention of memory: "remember that I'm vegetarian" is one,
"do you remember Paris?" and "I remember the old house" are not. English and Chinese put the request first;
Japanese and Korean usually put it last ("ベジタリアンだと覚えておいて", "채식주의자라는 걸 기억해 줘"), so both
ends are looked at. Questions are never requests.
"""

import re
from dataclasses import dataclass

from cairn.consolidation.candidates import Candidate, Kind, Provenance
from cairn.consolidation.records import normalized
from cairn.events import TranscriptAppended

EXPLICIT_IMPORTANCE = 1.0
MAX_STATEMENT_CHARS = 2000


def _any(*phrases: str) -> str:
    """One alternation, longest phrase first; a space in a phrase matches any run of spaces or none."""
    return "(?:" + "|".join(p.replace(" ", r"\s*") for p in sorted(phrases, key=len, reverse=True)) + ")"


# The request phrases per language: the tiny table the rules are made of.
EN_ASK = _any("remember", "dont forget", "don't forget", "do not forget", "never forget", "keep in mind")
EN_ASK_MORE = _any("make a note", "note down", "memorize", "memorise")
ZH_ASK = _any("记住", "记下", "记一下", "记好", "牢记", "请记得", "要记得", "别忘了", "别忘记", "不要忘了", "不要忘记")
ZH_ASK_MORE = _any("千万别忘了")
JA_ASK = _any(
    "覚えておいてください", "覚えておいて", "覚えといて", "覚えてて", "覚えて", "忘れないでください", "忘れないで"
)
JA_ASK_MORE = _any("メモしておいて", "メモして")
JA_ASK_LAST = _any(
    "覚えておいてください", "覚えておいて", "覚えといて", "覚えててね", "覚えてて", "覚えてね", "覚えて",
    "忘れないでください", "忘れないでね", "忘れないで",
)  # fmt: skip
KO_REMEMBER = _any("기억해 줘", "기억해 주세요", "기억해 둬", "기억해 놔", "기억하세요")
KO_FORGET_NOT = _any("잊지 마세요", "잊지 마", "잊지 말아 줘")

# The request, then what to keep.
LEADING: dict[str, str] = {
    "en": r"(?:(?:hey|ok|okay|so)[,\s]+)?(?:please[,\s]+)?(?:(?:can|could|would) you[,\s]+)?"
    rf"(?:{EN_ASK}|{EN_ASK_MORE})(?:\s+(?:this|for me|for later))?(?:\s*(?:that|:|,|-|—))?\s+",
    "zh": rf"(?:请|麻烦)?(?:你)?(?:帮我|给我)?(?:{ZH_ASK}|{ZH_ASK_MORE})(?:一下)?(?:这件事|这个|这点)?[：:，,。\s]*",
    "ja": rf"(?:{JA_ASK}|{JA_ASK_MORE})(?:ね|よ)?[：:、，,。\s]+",
    "ko": rf"(?:{KO_REMEMBER}|기억해|{KO_FORGET_NOT})[：:,，.\s]+",
}
# What to keep, then the request (Japanese, Korean). Bare Korean "기억해" is also "I remember": only after
# "…라는 걸" ("that …") is it a request.
TRAILING: dict[str, str] = {
    "ja": rf"(?:ということ|ってこと|なこと|こと|って|と)?(?:を|は)?\s*{JA_ASK_LAST}(?:ね|よ|ください)?[。！!]*$",
    "ko": rf"(?:(?:이)?라는|다는|는)\s*(?:걸|것을|거|사실을)\s*(?:꼭\s*)?(?:{KO_REMEMBER}|기억해)[.!。]*$"
    rf"|\s*(?:꼭\s*)?(?:{KO_REMEMBER}|{KO_FORGET_NOT})[.!。]*$",
}
LEADING_RE = {lang: re.compile(rf"^\s*{p}(?P<fact>.+)$", re.IGNORECASE | re.DOTALL) for lang, p in LEADING.items()}
TRAILING_RE = {lang: re.compile(rf"^\s*(?P<fact>.+?)(?:{p})", re.DOTALL) for lang, p in TRAILING.items()}
# A word every request holds: most messages hold none and skip the patterns (a few microseconds instead of hundreds).
TRIGGER = re.compile(r"remember|forget|keep in mind|note|memori[sz]e|记|忘|覚え|メモ|기억|잊지", re.IGNORECASE)
QUESTION = re.compile(r"(?:[?？]|吗|呢|か|까|나요|니)\s*[.。!！]*\s*$")
PREFERENCE_WORDS = re.compile(
    r"\b(?:prefer|like|love|hate|dislike|enjoy|favou?rite|allergic|can'?t stand)\b|"
    r"喜欢|不喜欢|爱吃|讨厌|不吃|不喝|偏好|过敏|好き|嫌い|苦手|좋아|싫어|알레르기",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Statement:
    fact: str
    language: str


def language_of(text: str) -> str:
    """en, zh, ja or ko by script: kana means Japanese, hangul Korean, other Han Chinese."""
    if re.search(r"[\u3040-\u30ff]", text):
        return "ja"
    if re.search(r"[\uac00-\ud7af\u1100-\u11ff]", text):
        return "ko"
    if re.search(r"[\u4e00-\u9fff]", text):
        return "zh"
    return "en"


def explicit_statement(text: str) -> Statement | None:
    """The fact an explicit "remember …" request asks to keep, or None."""
    said = text.strip()
    if not said or len(said) > MAX_STATEMENT_CHARS or not TRIGGER.search(said) or QUESTION.search(said):
        return None
    for lang, pattern in LEADING_RE.items():
        found = pattern.match(said)
        if found:
            return _statement(found["fact"], lang)
    for lang, pattern in TRAILING_RE.items():
        found = pattern.match(said)
        if found:
            return _statement(found["fact"], lang)
    return None


def _statement(fact: str, lang: str) -> Statement | None:
    kept = fact.strip().strip("：:，,、。.!！\"'“”「」").strip()
    if len(kept) < 2:
        return None
    if lang == "en":
        kept = kept[0].upper() + kept[1:]
    return Statement(kept, language_of(kept) if lang != "en" else "en")


def kind_of(fact: str) -> Kind:
    return "preference" if PREFERENCE_WORDS.search(fact) else "profile"


def relation_of(fact: str) -> str:
    """Without a model the relation is unknown: the fact names its own slot, so rules never supersede on a guess."""
    return normalized(fact)[:120] or "note"


def explicit_candidate(event: TranscriptAppended) -> Candidate | None:
    """A candidate from a user's explicit request in a direct conversation; other speakers and chats are not
    the owner's words to promote."""
    if event.role != "user" or event.chat_type != "direct" or not event.session_key.startswith("agent:"):
        return None
    statement = explicit_statement(event.text)
    if statement is None:
        return None
    provenance = Provenance(event.session_key, event.session_id, (event.message_id,), "owner", event.occurred_at)
    return Candidate(
        kind=kind_of(statement.fact),
        text=statement.fact,
        entity="user",
        relation=relation_of(statement.fact),
        importance=EXPLICIT_IMPORTANCE,
        original=event.text,
        provenance=provenance,
        explicit=True,
    )
