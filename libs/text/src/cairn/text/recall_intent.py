"""Whether a user message seeks something told before: the past, or plans and facts the user shared earlier.

Recall's second lane (a model reading memory) runs only for such messages, so "我下周有什么安排？" and "when is
my flight again?" escalate while "我明天去上海" and "what is the capital of France?" do not. Detection is a
rule over per-language cue tables (`recall_cues`), not a classifier: a message seeks memory when it is an
explicit recall request, or when it is a question (or a "tell me") AND it recollects, refers to the past, or
asks about the user's own plans without asking for advice. A statement is never a seek, whatever its tense.
"""

import re
import unicodedata
from dataclasses import dataclass

from cairn.text.recall_cues import TABLES, CueTable

_SCRIPTS = (
    ("ko", re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7a3]")),
    ("ja", re.compile(r"[\u3041-\u3096\u30a1-\u30fa\u30fc\uff66-\uff9f]")),
    ("zh", re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")),
)
_LATIN = re.compile(r"[a-z]{2}")
_SPACES = re.compile(r"[ \t\u3000]+")
_INVISIBLE = str.maketrans({"\u200b": None, "\u200c": None, "\u200d": None, "\ufeff": None})
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'"})
_TRADITIONAL = str.maketrans(
    "們說講話記還麼嗎劃計畫週機會議約預訂時點號誰這過對給幫來後裡個談間問沒為幾車飛辦買試訴請讓遊應該題剛決選與廳書藥醫電碼門開見覺發種氣簽證飯禮檢課務業線單當從於現實歡體曆長聯絡鐘錶錢隊臺灣蘭東寫學習雙萬",
    "们说讲话记还么吗划计画周机会议约预订时点号谁这过对给帮来后里个谈间问没为几车飞办买试诉请让游应该题刚决选与厅书药医电码门开见觉发种气签证饭礼检课务业线单当从于现实欢体历长联络钟表钱队台湾兰东写学习双万",
)
_HEAD_CHARS = 160
_TAIL_CHARS = 320
"""A long message is read at its start and its end, where a question about the past is asked; the middle of a
pasted document is its content, and skipping it keeps a 4096-character message well under a millisecond."""
_CUE_CHARS = 24
"""A cue in a trace is cut to this many characters: it names the cue, the message is in the trace already."""


@dataclass(frozen=True)
class Intent:
    """The decision with its evidence for traces: `cue` is `kind:matched text` of the cue that decided (two joined by
    " + " when one counts only with the other), or None when nothing did."""

    seeks: bool
    language: str
    cue: str | None


def seeks_memory(text: str) -> bool:
    """True when the message asks about something told before (the past, or plans/facts shared earlier)."""
    return intent_of(text).seeks


def intent_of(text: str) -> Intent:
    """The message's recall intent, with its language (en, zh, ja, ko) and the cue that decided it."""
    normal = _normalise(text)
    language = _language(normal)
    if language == "zh":
        normal = normal.translate(_TRADITIONAL)
    tables = [TABLES[language]]
    if language != "en" and _LATIN.search(normal):
        tables.append(TABLES["en"])  # chat mixes in English words: "我们上次说的 deadline 是哪天"
    seeks, cue = _decide(_Cues(tables, normal))
    return Intent(seeks=seeks, language=language, cue=cue)


def _normalise(text: str) -> str:
    if len(text) > _HEAD_CHARS + _TAIL_CHARS:
        text = f"{text[:_HEAD_CHARS]}\n{text[-_TAIL_CHARS:]}"
    folded = unicodedata.normalize("NFKC", text).translate(_INVISIBLE).translate(_APOSTROPHES).casefold()
    return _SPACES.sub(" ", folded).strip()


def _language(text: str) -> str:
    for language, script in _SCRIPTS:
        if script.search(text):
            return language
    return "en"


class _Cues:
    """Looks a kind of cue up in every table that applies, and remembers what it found."""

    def __init__(self, tables: list[CueTable], text: str) -> None:
        self._tables = tables
        self._text = text

    def find(self, kind: str) -> str | None:
        for table in self._tables:
            pattern: re.Pattern[str] = getattr(table, kind)
            match = pattern.search(self._text)
            if match:
                return f"{kind}:{match.group(0).strip()[:_CUE_CHARS]}"
        return None

    def both(self, kind: str, about: str) -> str | None:
        """`kind` counts only together with `about` (a past time only about the user)."""
        found = self.find(kind)
        if not found:
            return None
        other = self.find(about)
        return f"{found} + {other}" if other else None


def _decide(cues: _Cues) -> tuple[bool, str | None]:
    recall = cues.find("recall")
    if recall:
        return True, recall
    if not (cues.find("question") or cues.find("ask")):
        # A statement, whatever its tense, unless it asks to be reminded of the past: "提醒我一下上次…".
        return (True, _past(cues)) if cues.find("remind") and _past(cues) else (False, None)
    past = _past(cues)
    if past:
        return True, past
    plan = (
        cues.find("plan")
        or cues.both("fact", "self_")
        or cues.both("when", "self_")
        or cues.both("when", "fact")
        or cues.both("fact", "future_time")
        or cues.both("future_time", "scheduled")
    )
    if not plan:
        return False, None
    advice = cues.find("advice")
    if advice:
        return False, advice
    return True, plan


def _past(cues: _Cues) -> str | None:
    return cues.find("recollect") or cues.find("past") or cues.find("self_past") or cues.both("past_time", "self_")
