"""Numbers as relative dates spell them: digits, English words, Chinese/Japanese numerals and Korean native
counts, pure."""

import re

ENGLISH = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "couple of": 2, "a few": 3,
}  # fmt: skip
ENGLISH_NUMBER = r"(?:\d{1,3}|" + "|".join(sorted(ENGLISH, key=len, reverse=True)).replace(" ", r"\s+") + ")"

_CJK_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "兩": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
               "八": 8, "九": 9}  # fmt: skip
CJK_NUMBER = r"(?:\d{1,3}|[零〇一二两兩三四五六七八九十]{1,3})"

# Korean native counts of days ("이틀 후", in two days) and of weeks/months ("두 달 뒤").
KOREAN_DAYS = {"하루": 1, "이틀": 2, "사흘": 3, "나흘": 4, "닷새": 5, "엿새": 6, "이레": 7, "여드레": 8, "아흐레": 9,
               "열흘": 10}  # fmt: skip
KOREAN_COUNTS = {"한": 1, "두": 2, "세": 3, "네": 4, "다섯": 5, "여섯": 6}


def english_number(text: str) -> int:
    words = re.sub(r"\s+", " ", text.strip().lower())
    return int(words) if words.isdigit() else ENGLISH[words]


def cjk_number(text: str) -> int | None:
    """`十五` → 15, `二十` → 20, `两` → 2, `12` → 12; None for what is no number below 100."""
    if text.isdigit():
        return int(text)
    if "十" not in text:
        return _CJK_DIGITS.get(text) if len(text) == 1 else None
    tens, _, ones = text.partition("十")
    high = _CJK_DIGITS.get(tens, -1) if tens else 1
    low = _CJK_DIGITS.get(ones, -1) if ones else 0
    return None if high < 0 or low < 0 else high * 10 + low
