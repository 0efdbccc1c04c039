"""STAND-IN for `cairn.text.recall_intent.seeks_memory` (branch intent), until that branch lands: a handful of
question cues, enough for recall's own tests. Delete this module and import the real one when it does."""

import re

_CUES = re.compile(
    r"(什么安排|有什么计划|上次|之前|还记得|说过|哪天|几号|什么时候|吗？|\?$|？$|"
    r"\bwhat did\b|\bwhen is\b|\bwhere did\b|\bremember\b|\bagain\b|\blast time\b|何時|いつ|언제)",
    re.IGNORECASE,
)


def seeks_memory(text: str) -> bool:
    return bool(_CUES.search(text.strip()))
