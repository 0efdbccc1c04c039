"""Application-side tokenizer for PostgreSQL full-text search with the ``'simple'`` configuration.

Documents and queries go through the same scanner, and PostgreSQL's parser treats a term alike on
both sides: where it re-splits one (``err_conn_reset`` into three words at consecutive positions),
``to_tsquery`` turns that quoted lexeme into a ``<->`` phrase of the same words, which still matches.
Latin-script words are kept exact and stemmed; identifiers are kept whole and split into parts; CJK
runs become character unigrams and overlapping bigrams, so every fragment of 1+ characters is found.

CJK query matching: a run of two or more characters becomes the AND (``&``) of its overlapping
bigrams, never a ``<->`` phrase. Every document containing the fragment contains each of its
bigrams, so AND never misses a match, and it does not depend on positions: ``to_tsvector``
positions saturate at 16383 and keep at most 256 positions per lexeme, and PostgreSQL's parser may
split a bigram the locale does not classify as letters, all of which would silently break
``<->``. The price is a rare false positive (``发布`` and ``布会`` apart, without ``发布会``), which
ranking all-terms matches by ``ts_rank`` keeps harmless.
"""

import operator
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import snowballstemmer

MAX_TERM_CHARS = 64
"""Longer terms are cut: nobody searches for 200 characters of base64, and lexemes stay small."""

_MAX_CLAUSES = 256
"""Caps a query's clauses so a pasted 4096-character query cannot make every row's match costly."""

# Scripts written without spaces between words, as they stand after NFKC: half-width forms, Kangxi
# radicals and compatibility ideographs are folded into these blocks first. Combining voicing marks,
# the Katakana middle dot and unassigned gaps are left out, since PostgreSQL's parser drops them.
_CJK = (
    "\u1100-\u11ff"  # Hangul Jamo (NFKC target of compatibility and half-width Jamo)
    "\u3005-\u3007\u303b"  # 々 〆 〇 〻
    "\u3041-\u3096\u309d-\u309f"  # Hiragana
    "\u30a1-\u30fa\u30fc-\u30ff"  # Katakana, with the prolonged sound mark
    "\u3105-\u312f\u31a0-\u31bf"  # Bopomofo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # Han extension A
    "\u4e00-\u9fff"  # Han unified ideographs
    "\ua960-\ua97c"  # Hangul Jamo extended-A
    "\uac00-\ud7a3"  # Hangul syllables
    "\ud7b0-\ud7c6\ud7cb-\ud7fb"  # Hangul Jamo extended-B
    "\ufa0e-\ufa29"  # the twelve unified ideographs among the compatibility ones
    "\U0001b000-\U0001b122"  # Kana supplement and extended-A
    "\U00020000-\U0002a6df"  # Han extension B
    "\U0002a700-\U0002ee5f"  # Han extensions C-F and I
    "\U00030000-\U000323af"  # Han extensions G-H
)
_WORD = f"[^\\W_{_CJK}]+"
# A token is a CJK run, or letters/digits possibly joined by _ . - / @ into one identifier.
_TOKEN = re.compile(f"(?P<cjk>[{_CJK}]+)|(?P<word>{_WORD}(?:(?:_+|[./@-]){_WORD})*)")
_JOINERS = re.compile(r"[_./@-]+")
_APOSTROPHE = re.compile(r"(?<=\w)['’](?=\w)")
_STEMMABLE = re.compile(r"[a-zß-öø-ɏ]+")
_UNSAFE = re.compile(r"[\s'\"\\:&|!()<>*\x00\ud800-\udfff]+")
_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"'})

_Clause = tuple[str, ...]
"""Lexemes of which any one satisfies the clause (a word's exact form and its stem)."""


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """Both tsqueries of one search, so documents with every term can rank above partial matches.

    Each string is accepted by ``to_tsquery('simple', $1)`` and by a plain ``$1::tsquery`` cast.
    """

    all_terms: str
    any_terms: str
    terms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Unit:
    """One thing the user asked for; loose units may be matched clause by clause in the OR query."""

    clauses: tuple[_Clause, ...]
    loose: bool


def index_terms(text: str) -> list[str]:
    """Lexemes of a document in reading order, repeats kept so ``ts_rank`` sees term frequency."""
    terms: list[str] = []
    for match in _TOKEN.finditer(_normalise(text)):
        run = match["cjk"]
        if run is None:
            terms.extend(_word_terms(match["word"]))
        else:
            terms.extend(_bigrams(run))
            terms.extend(run)
    return terms


def to_tsvector_text(terms: Iterable[str]) -> str:
    """Space-joined lexemes for ``to_tsvector('simple', $1)``, stripped of tsvector/tsquery syntax."""
    return " ".join(_safe_terms(terms))


_MAX_POSITION = 16383  # tsvector positions saturate here


def to_tsvector_literal(terms: Iterable[str]) -> str:
    """A tsvector in its input syntax (``'lexeme':1,4 …``) for a ``$1::tsvector`` cast.

    Unlike ``to_tsvector``, the cast never re-parses: what the tokenizer produced is exactly what is
    indexed, whatever the database's locale thinks a letter is, so index and ``::tsquery`` agree.
    """
    positions: dict[str, list[str]] = {}
    for index, term in enumerate(_safe_terms(terms)):
        positions.setdefault(term, []).append(str(min(index + 1, _MAX_POSITION)))
    return " ".join(f"'{term}':{','.join(where)}" for term, where in positions.items())


def query_terms(text: str) -> list[str]:
    """Distinct lexemes a query searches for, in order; also what a snippet should centre on."""
    units = _query_units(text)
    lexemes = (lexeme for unit in units for clause in unit.clauses for lexeme in clause)
    return list(dict.fromkeys(lexemes))


def to_tsquery(text: str) -> str | None:
    """The all-terms tsquery of a free-text query, or None when nothing in it is searchable."""
    query = build_query(text)
    return None if query is None else query.all_terms


def build_query(text: str) -> SearchQuery | None:
    """AND and OR tsqueries of a free-text query; ``"quoted phrases"`` stay whole in both."""
    units = _query_units(text)
    clauses = list(dict.fromkeys(clause for unit in units for clause in unit.clauses))
    if not clauses:
        return None
    alternatives = list(dict.fromkeys(_alternatives(units)))
    lexemes = dict.fromkeys(lexeme for clause in clauses for lexeme in clause)
    return SearchQuery(
        all_terms=" & ".join(_render(clause) for clause in clauses[:_MAX_CLAUSES]),
        any_terms=" | ".join(alternatives[:_MAX_CLAUSES]),
        terms=tuple(lexemes),
    )


def _normalise(text: str) -> str:
    """NFKC folds full-width and compatibility forms; apostrophes go so "user's" stems to "user"."""
    return _APOSTROPHE.sub("", unicodedata.normalize("NFKC", text).lower())


def _bigrams(run: str) -> list[str]:
    """Overlapping character pairs, built by ``map`` rather than a per-character Python loop."""
    return list(map(operator.add, run, run[1:]))


def _forms(word: str) -> _Clause:
    """A word and, when it differs, its English stem; other scripts and numbers stay exact."""
    if _STEMMABLE.fullmatch(word) is None:
        return (word,)
    stem = _stem(word)
    return (word,) if stem == word else (word, stem)


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    """Cached because Snowball costs ~50 µs a word; a fresh stemmer per miss keeps it thread-safe."""
    return str(snowballstemmer.stemmer("english").stemWord(word))


@lru_cache(maxsize=65536)
def _word_terms(token: str) -> tuple[str, ...]:
    """A plain word with its stem, or an identifier whole and then each part; cached per token."""
    parts = _JOINERS.split(token)
    whole = (token[:MAX_TERM_CHARS],) if len(parts) > 1 else ()
    return whole + tuple(form for part in parts for form in _forms(part[:MAX_TERM_CHARS]))


def _safe_terms(terms: Iterable[str]) -> Iterator[str]:
    """Terms from any source made safe as lexemes: no whitespace, quotes or tsquery operators."""
    for term in terms:
        safe = _UNSAFE.sub("", term)[:MAX_TERM_CHARS]
        if safe:
            yield safe


def _query_units(text: str) -> list[_Unit]:
    """Splits on double quotes: odd segments are phrases, an unmatched quote is just punctuation."""
    segments = _normalise(text).translate(_QUOTES).split('"')
    units: list[_Unit] = []
    for index, segment in enumerate(segments):
        inner = _scan_units(segment)
        if index % 2 == 1 and index < len(segments) - 1:
            phrase = tuple(dict.fromkeys(clause for unit in inner for clause in unit.clauses))
            units.extend([_Unit(phrase, loose=False)] if phrase else [])
        else:
            units.extend(inner)
    return units


def _scan_units(text: str) -> list[_Unit]:
    """Units of already normalised text: words OR their stem, identifiers whole, CJK runs bigrams."""
    units: list[_Unit] = []
    for match in _TOKEN.finditer(text):
        run = match["cjk"]
        if run is None:
            units.append(_Unit((_word_clause(match["word"]),), loose=False))
        elif len(run) == 1:
            units.append(_Unit(((run,),), loose=True))
        else:
            units.append(_Unit(tuple((bigram,) for bigram in dict.fromkeys(_bigrams(run))), loose=True))
    return units


def _word_clause(token: str) -> _Clause:
    """Identifiers are searched whole (the index holds them whole); plain words also by stem."""
    if _JOINERS.search(token) is not None:
        return (token[:MAX_TERM_CHARS],)
    return _forms(token[:MAX_TERM_CHARS])


def _alternatives(units: list[_Unit]) -> Iterator[str]:
    """OR-query operands: an unsegmented CJK sentence counts bigram by bigram, a phrase whole."""
    for unit in units:
        if unit.loose or len(unit.clauses) == 1:
            yield from (_render(clause) for clause in unit.clauses)
        else:
            yield "(" + " & ".join(_render(clause) for clause in unit.clauses) + ")"


def _render(clause: _Clause) -> str:
    """Quotes every lexeme, so nothing a user typed is ever read as tsquery syntax."""
    quoted = ["'" + lexeme.replace("'", "''") + "'" for lexeme in clause]
    return quoted[0] if len(quoted) == 1 else "(" + " | ".join(quoted) + ")"
