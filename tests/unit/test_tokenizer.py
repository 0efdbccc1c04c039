"""The full-text tokenizer: what a document indexes, what a query asks for, and tsquery safety.

Queries are checked by a small evaluator of the tsquery grammar the tokenizer emits (quoted lexemes,
``&``, ``|``, ``<->``/``<N>``, parentheses): parsing it proves the structure, evaluating it against a
document's terms models ``@@``. A term set cannot model positions, so the evaluator reads a phrase
operator as ``&`` (a phrase's necessary condition); tests/integration/test_fulltext.py checks phrases
against Postgres itself.
"""

import random
import re

import pytest

from cairn.text import (
    MAX_TERM_CHARS,
    build_query,
    index_slots,
    index_terms,
    message_vector,
    query_terms,
    slots_literal,
    to_tsquery,
    to_tsvector_text,
)
from cairn.text.tokenizer import _CJK

SHANGHAI = "下周二我去上海参加产品发布会"
TOKYO = "来週東京に行きます"
SEOUL = "다음주에 서울에 갑니다"
MIXED = "我用Python写ERR_CONN_RESET处理"
_CJK_BIGRAM = re.compile(f"[{_CJK}]{{2}}")
FORBIDDEN = set(" \t\r\n'\"\\:&|!()<>*")
_QUERY_TOKEN = re.compile(r"\s*(?:(?P<op>[&|()]|<->|<[0-9]+>)|'(?P<lexeme>(?:[^']|'')+)')")


def _tokens(query: str) -> list[tuple[str, str]]:
    """Splits a tsquery into operators and unquoted lexemes; anything else fails the test."""
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(query):
        match = _QUERY_TOKEN.match(query, position)
        assert match is not None, f"unexpected text at {position} in {query!r}"
        if match["op"] is not None:
            tokens.append(("op", match["op"]))
        else:
            lexeme = match["lexeme"].replace("''", "'")
            assert not FORBIDDEN & set(lexeme), f"unsafe lexeme {lexeme!r}"
            assert 0 < len(lexeme) <= MAX_TERM_CHARS
            tokens.append(("lexeme", lexeme))
        position = match.end()
    return tokens


def _matches(query: str, terms: set[str]) -> bool:
    """Evaluates a tsquery against a document's lexemes, with ``&`` binding tighter than ``|``."""
    tokens = _tokens(query)

    def either(at: int) -> tuple[bool, int]:
        value, at = both(at)
        while at < len(tokens) and tokens[at] == ("op", "|"):
            right, at = both(at + 1)
            value = value or right
        return value, at

    def both(at: int) -> tuple[bool, int]:
        value, at = phrase(at)
        while at < len(tokens) and tokens[at] == ("op", "&"):
            right, at = phrase(at + 1)
            value = value and right
        return value, at

    def phrase(at: int) -> tuple[bool, int]:
        value, at = operand(at)
        while at < len(tokens) and tokens[at][0] == "op" and tokens[at][1].startswith("<"):
            right, at = operand(at + 1)
            value = value and right
        return value, at

    def operand(at: int) -> tuple[bool, int]:
        assert at < len(tokens), f"operand missing at the end of {query!r}"
        kind, text = tokens[at]
        if (kind, text) == ("op", "("):
            value, at = either(at + 1)
            assert tokens[at] == ("op", ")"), f"unbalanced parentheses in {query!r}"
            return value, at + 1
        assert kind == "lexeme", f"operator {text!r} where an operand belongs in {query!r}"
        return text in terms, at + 1

    value, end = either(0)
    assert end == len(tokens), f"trailing tokens in {query!r}"
    return value


def _finds(document: str, query: str) -> bool:
    built = build_query(query)
    assert built is not None
    return _matches(built.all_terms, set(index_terms(document)))


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        (SHANGHAI, "上海"),
        (SHANGHAI, "发布"),
        (SHANGHAI, "发布会"),
        (SHANGHAI, "产品发布会"),
        (SHANGHAI, "上"),
        (SHANGHAI, "会"),
        (SHANGHAI, SHANGHAI),
        (TOKYO, "東京"),
        (TOKYO, "行きます"),
        (TOKYO, "に"),
        (SEOUL, "서울"),
        (SEOUL, "갑니다"),
        (SEOUL, "서울에 갑니다"),
        ("ラーメンを食べた", "ラーメン"),
        ("사랑해요 𠀀𠀁𠀂 字", "𠀁𠀂"),
        (MIXED, "python"),
        (MIXED, "Python"),
        (MIXED, "ERR_CONN_RESET"),
        (MIXED, "conn"),
        (MIXED, "处理"),
        (MIXED, "写"),
    ],
)
def test_fragment_is_found(document: str, fragment: str) -> None:
    assert _finds(document, fragment)


@pytest.mark.parametrize(
    ("document", "query"),
    [
        (SHANGHAI, "北京"),
        (SHANGHAI, "海上"),
        (TOKYO, "大阪"),
        (TOKYO, "东京"),
        (SEOUL, "부산"),
        (MIXED, "ERR_CONN_TIMEOUT"),
        (MIXED, "java"),
    ],
)
def test_absent_fragment_is_not_found(document: str, query: str) -> None:
    assert not _finds(document, query)


def test_cjk_run_emits_bigrams_and_unigrams() -> None:
    terms = index_terms(SHANGHAI)
    assert {"上海", "发布", "布会", "上", "海"} <= set(terms)
    assert len(terms) == 2 * len(SHANGHAI) - 1


def test_mixed_scripts_split_at_script_boundaries() -> None:
    assert index_terms(MIXED) == [
        *("我用", "我", "用", "python", "写"),
        *("err_conn_reset", "err", "conn", "reset", "处理", "处", "理"),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ERR_CONN_RESET", ["err_conn_reset", "err", "conn", "reset"]),
        ("config.yaml", ["config.yaml", "config", "yaml"]),
        ("snake_case", ["snake_case", "snake", "case"]),
        ("v2.3.1", ["v2.3.1", "v2", "3", "1"]),
        ("PR-1234", ["pr-1234", "pr", "1234"]),
        ("bob@example.org", ["bob@example.org", "bob", "example", "exampl", "org"]),
        ("/usr/bin/env", ["usr/bin/env", "usr", "bin", "env"]),
        ("3.14 2026", ["3.14", "3", "14", "2026"]),
        ("see config.yaml.", ["see", "config.yaml", "config", "yaml"]),
    ],
)
def test_identifiers_are_kept_whole_and_split(text: str, expected: list[str]) -> None:
    assert index_terms(text) == expected


@pytest.mark.parametrize(
    ("document", "query"),
    [
        ("running late", "runs"),
        ("he runs", "running"),
        ("two connections", "connection"),
        ("users", "user's"),
    ],
)
def test_stems_bridge_word_forms(document: str, query: str) -> None:
    assert _finds(document, query)


def test_exact_form_and_stem_are_both_indexed() -> None:
    assert index_terms("Running") == ["running", "run"]
    assert index_terms("run") == ["run"]


def test_other_scripts_are_lowercased_not_stemmed() -> None:
    assert index_terms("Ελληνικά Русский") == ["ελληνικά", "русский"]


def test_punctuation_and_emoji_are_dropped() -> None:
    assert index_terms("Hello, world!!! 🎉🚀 — «ok» (fine)… ※ 。、") == ["hello", "world", "ok", "fine"]


def test_full_width_and_half_width_forms_are_folded() -> None:
    assert index_terms("ＡＢＣ１２３") == ["abc123"]
    assert "カタ" in index_terms("ｶﾀｶﾅ")


def test_repeated_words_keep_their_repeats_for_ranking() -> None:
    assert index_terms("cat cat") == ["cat", "cat"]


def test_long_terms_are_capped() -> None:
    token = "a" * 100 + "_" + "b" * 100
    assert all(len(term) <= MAX_TERM_CHARS for term in index_terms(token))
    assert _finds(token, token)


@pytest.mark.parametrize("query", ["", "   ", "\n\t", "!!!", "🎉🎉", '""', "()&|!<>*:'\\", "。、「」"])
def test_query_without_searchable_terms_is_none(query: str) -> None:
    assert build_query(query) is None
    assert to_tsquery(query) is None
    assert query_terms(query) == []


def test_word_query_ors_exact_form_and_stem() -> None:
    assert to_tsquery("Running") == "('running' | 'run')"


def test_cjk_query_ands_bigrams() -> None:
    assert to_tsquery("发布会") == "'发布' & '布会'"
    assert to_tsquery("上") == "'上'"


def test_all_terms_require_every_term_any_terms_take_one() -> None:
    built = build_query("上海 北京")
    assert built is not None
    terms = set(index_terms(SHANGHAI))
    assert not _matches(built.all_terms, terms)
    assert _matches(built.any_terms, terms)


def test_unsegmented_cjk_query_matches_partially_in_any_terms() -> None:
    built = build_query("上海发布会")
    assert built is not None
    terms = set(index_terms(SHANGHAI))
    assert not _matches(built.all_terms, terms)
    assert _matches(built.any_terms, terms)


def test_quoted_phrase_stays_whole_in_any_terms() -> None:
    built = build_query('"产品 北京" 上海')
    assert built is not None
    assert built.any_terms == "('产品' <2> '北京') | '上海'"  # 产品 takes two slots
    assert not _matches(built.any_terms, set(index_terms("产品")))


def test_unmatched_quote_is_ignored() -> None:
    assert to_tsquery('"open ended') == "'open' & ('ended' | 'end')"


def test_query_terms_are_distinct_lexemes_in_order() -> None:
    assert query_terms("runs RUN conn 上海") == ["run", "runs", "conn", "上海"]


def test_to_tsvector_text_strips_tsquery_syntax() -> None:
    assert (
        to_tsvector_text(["a:b", "it's", "x&y|z", "(p)", "   ", "q\\", "<*!>", "n\x00ul\ud800"]) == "ab its xyz p q nul"
    )
    assert to_tsvector_text(index_terms(MIXED)).split() == index_terms(MIXED)


def test_huge_query_is_capped_and_well_formed() -> None:
    built = build_query(" ".join(f"w{index}" for index in range(1000)))
    assert built is not None
    assert built.all_terms.count("&") == 255
    assert _matches(built.all_terms, {f"w{index}" for index in range(256)})


def _random_text(rng: random.Random) -> str:
    pools = [
        (0x20, 0x7E),
        (0x00, 0x2FF),
        (0x0300, 0x036F),
        (0x0370, 0x04FF),
        (0x3000, 0x30FF),
        (0x4E00, 0x9FFF),
        (0xAC00, 0xD7A3),
        (0xD800, 0xDFFF),
        (0xFF00, 0xFFEF),
        (0x1F300, 0x1FAFF),
        (0x20000, 0x2A6DF),
    ]
    syntax = "'\"\\:&|!()<>* \t_.-/@"
    length = rng.randint(0, 40)
    return "".join(
        rng.choice(syntax) if rng.random() < 0.25 else chr(rng.randint(*rng.choice(pools))) for _ in range(length)
    )


def test_fuzz_queries_are_well_formed_and_match_their_own_text() -> None:
    rng = random.Random(20261130)
    for _ in range(3000):
        text = _random_text(rng)
        terms = index_terms(text)
        assert all(term and not FORBIDDEN & set(term) and len(term) <= MAX_TERM_CHARS for term in terms)
        built = build_query(text)
        if built is None:
            assert not terms, text
            continue
        assert _matches(built.all_terms, set(terms)), text
        assert _matches(built.any_terms, set(terms)), text
        assert to_tsquery(text) == built.all_terms


def test_fuzz_every_cjk_substring_is_found() -> None:
    rng = random.Random(7)
    for _ in range(1000):
        document = "".join(chr(rng.randint(0x4E00, 0x4E40)) for _ in range(rng.randint(1, 50)))
        start = rng.randrange(len(document))
        fragment = document[start : rng.randint(start + 1, len(document))]
        assert _finds(document, fragment), (document, fragment)


def _literal_per_occurrence(pairs: list[tuple[str, int]], implied: frozenset[str] = frozenset()) -> str:
    """The tsvector literal as first written: every occurrence cleaned and cut on its own, positions in the
    order seen, saturated at 16383, without repeats, at most 256 per lexeme; every position of an `implied`
    term weighted C."""
    positions: dict[str, dict[int, None]] = {}
    for term, slot in pairs:
        safe = re.sub(r"[\s'\"\\:&|!()<>*\x00\ud800-\udfff]+", "", term)[:MAX_TERM_CHARS]
        if safe:
            positions.setdefault(safe, {})[min(slot, 16383)] = None
    return " ".join(
        f"'{term}':{','.join(str(slot) + ('C' if term in implied else '') for slot in list(where)[:256])}"
        for term, where in positions.items()
    )


def _starting_bigrams(pairs: list[tuple[str, int]]) -> frozenset[str]:
    """The CJK characters that start a bigram among the pairs: what a message's vector weights C."""
    return frozenset(term[0] for term, _ in pairs if _CJK_BIGRAM.fullmatch(term))


@pytest.mark.parametrize(
    "pairs",
    [
        [("ship", 1), ("harbour", 2), ("ship", 3), ("上海", 4), ("上", 4), ("ship", 3)],
        [("big", 16382), ("big", 16383), ("big", 20000), ("big", 30000), ("late", 16390)],
        [("many", slot) for slot in range(1, 400)],
        [("a:b", 1), ("ab", 2), ("it's", 3), ("", 4), ("x" * 80, 5), ("x" * 64, 6), ("a b", 7), ("ab", 8)],
        [("n\x00ul", 1), ("nul", 2), ("(p)", 3), ("p", 1)],
        [],
    ],
    ids=["repeats", "saturation", "position-cap", "cleaned-and-cut-merge", "control-chars", "empty"],
)
def test_slots_literal_equals_cleaning_every_occurrence(pairs: list[tuple[str, int]]) -> None:
    """Each distinct term is cleaned once now; the literal must be what cleaning every occurrence gave."""
    assert slots_literal(pairs) == _literal_per_occurrence(pairs)
    assert slots_literal(iter(pairs)) == _literal_per_occurrence(pairs)


def test_fuzz_message_vectors_equal_cleaning_every_occurrence() -> None:
    rng = random.Random(11)
    alphabet = "ab上海发布会서울東京 _-./@'\":&|!()<>*\\\t\x00xyzÉé１２"
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
        name = rng.choice([None, "Alice", "Bob O'Neil", "李雷"])
        head = index_slots(name) if name else []
        first = max((slot for _, slot in head), default=-1) + 2
        pairs = [*head, *index_slots(text, first)]
        assert message_vector(text, name) == _literal_per_occurrence(pairs, _starting_bigrams(pairs))


def _vector_from_pairs(text: str, name: str | None) -> str:
    """`message_vector` as first written: the name's and the text's (term, slot) pairs, then `slots_literal`, and
    every position of a CJK character that starts a bigram weighted C."""
    head = index_slots(name) if name else []
    first = max((slot for _, slot in head), default=-1) + 2
    pairs = [*head, *index_slots(text, first)]
    implied = _starting_bigrams(pairs)
    return re.sub(
        r"'([^']+)':([0-9,]+)",
        lambda m: m[0] if m[1] not in implied else f"'{m[1]}':" + ",".join(p + "C" for p in m[2].split(",")),
        slots_literal(pairs),
    )


_MIXED_WORDS = [
    "deploy", "deployment", "running", "runs", "Berlin", "it's", "user's", "ERR_CONN_RESET", "api.example.com",
    "v1.2.3", "a@b.io", "snake_case_name", "PAY-469", "9:30", "484", "EUR", "Élodie", "straße", "Ｐｙｔｈｏｎ", "ｶﾀｶﾅ",
    "上海", "产品发布会", "我用Python写", "来週東京に行きます", "ラーメン", "다음주에", "서울에", "갑니다", "𠀀𠀁𠀂",
    "々", "、", "。", "！", "😀", "\"quoted\"", "(x)", "a|b", "c&d", "e:f", "x" * 80, "y" * 64 + "-z", "\x00", "\t",
    "\ud800", "'", "—", "_", "__init__", "ﬁle", "Ⅻ",
]  # fmt: skip


def test_message_vector_equals_the_pairs_it_groups() -> None:
    """`message_vector` groups terms as it scans; the literal must be the one its (term, slot) pairs give, for
    the load generator's messages and for random mixed Chinese, English, Japanese and Korean text."""
    from cairn.cli.chatgen import Traffic

    traffic = Traffic(50, 7)
    for _ in range(500):
        message = traffic.message(traffic.pick_tenant())
        assert message_vector(message["text"], message["sender_name"]) == _vector_from_pairs(
            message["text"], message["sender_name"]
        )
    rng = random.Random(14)
    names = [None, "", "Alice", "李雷", "さくら", "김민준", "O'Neil", "!!!", "x" * 70, "ops-bot_2"]
    for _ in range(3000):
        words = rng.choices(_MIXED_WORDS, k=rng.randint(0, 30))
        text = "".join(word + rng.choice(["", " ", " ", "  ", "\n", ", "]) for word in words)
        name = rng.choice(names)
        assert message_vector(text, name) == _vector_from_pairs(text, name), (text, name)
    for text, name in [(SHANGHAI, "Bob"), (TOKYO, None), (SEOUL, "서울"), (MIXED, "")]:
        assert message_vector(text, name) == _vector_from_pairs(text, name)


def test_word_terms_say_whether_they_need_cleaning() -> None:
    """What lets `message_vector` skip `slots_literal`'s check: a cached word says if any of its terms is unclean
    (the scanner never yields one today; the flag keeps the literal right if that ever changes)."""
    from cairn.text.tokenizer import _word_slots

    assert all(_word_slots(word)[2] for word in ("deploy", "x" * 80, "err_conn-reset"))
    assert not any(_word_slots(word)[2] for word in ("a:b", "it's", "a b"))


def test_a_message_weights_c_the_cjk_characters_that_start_a_bigram() -> None:
    """The search index leaves those out (0142): the bigram's key holds the row. A character that ends every run it
    is in, or stands alone, is not weighted; nor is anything else."""
    assert message_vector("上上海 会 ok", "李雷") == (
        "'李雷':1 '李':1C '雷':2 '上上':4 '上海':5 '上':4C,5C '海':6 '会':7 'ok':8"
    )
    assert message_vector("ラーメン 서울에", None) == (
        "'ラー':1 'ーメ':2 'メン':3 'ラ':1C 'ー':2C 'メ':3C 'ン':4 '서울':5 '울에':6 '서':5C '울':6C '에':7"
    )
