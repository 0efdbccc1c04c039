"""Application-side tokenizer for PostgreSQL full-text search, shared by the index and the query.

Documents and queries go through the same scanner and reach Postgres as literals (``::tsvector``,
``::tsquery``), so Postgres never re-tokenizes: what this module emits is exactly what is indexed and
asked. Latin-script words are kept exact and stemmed; identifiers (error codes, file names,
``snake_case``, versions, hosts) are kept whole and split into parts; CJK runs (Han, kana, Hangul)
become character unigrams and overlapping bigrams, so every fragment of 1+ characters is found.

Positions are word slots: a word's exact form and its stem share one slot, an identifier's whole form
shares the slot of its first part, and a CJK character's unigram shares the slot of the bigram that
starts with it. That keeps slots in reading order, so a ``"quoted phrase"`` becomes a tsquery chain
with ``<N>`` distances that Postgres checks against positions, in any script.

In a message's vector a CJK unigram that starts a bigram of the message is weighted ``C`` (every one of its
positions): the search index leaves it out, since the bigram's key already holds the row and a query asks a
single CJK character as a prefix of the keys (`indexer.tenant_terms`, the indexer's schema baseline; was migration
0142). Weights mean nothing else to message search.

Unquoted CJK fragments are the AND (``&``) of their bigrams, never a positional chain: every document
containing the fragment contains each bigram, and AND does not depend on positions, which saturate at
16383 (a phrase past that point of a very long message is not found; the fragment still is). The
price is a rare false positive (``发布`` and ``布会`` apart, without ``发布会``), ranked below.

Queries come out in two forms: ``all_terms`` (every unit) marks the messages that contain every term,
``any_terms`` (any unit) finds candidates; ``lexemes`` and ``weights`` feed the BM25-style ranking.
Common English function words are left out of a query unless it has nothing else.
"""

import operator
import re
import unicodedata
from collections.abc import Iterable, Iterator, Set
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

EXACT_WEIGHT = 0.25
"""Ranking weight of a word's exact form next to its stem's 1.0: "running" ranks "running" above "runs"."""
PART_WEIGHT = 0.5
"""Ranking weight shared by an identifier's parts next to the whole identifier's 1.0."""

# Function words a query may drop when it has anything else to search for. Documents keep them: they
# stay searchable alone and inside "quoted phrases". Apostrophes are gone by now ("didn't" → "didnt").
_FUNCTION_WORDS = """
    a about after again all am an and any are as at be because been before being between both but by
    can could did didnt do does doesnt doing dont down during each for from further had has have having
    he her here hers him his how i id if im in into is isnt it its ive just me my myself no nor not now
    of off on once only or other our ours out over own same she should so some such than that thats the
    their theirs them then there these they this those through to too under until up very was wasnt we
    were what whats when where which while who whom whose why will with would you your yours
"""
STOPWORDS = frozenset(_FUNCTION_WORDS.split())


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """What one search asks Postgres for.

    ``all_terms`` and ``any_terms`` are accepted by a plain ``$1::tsquery`` cast (and by
    ``to_tsquery('simple', $1)``); ``lexemes``/``weights`` are the ranked terms; ``terms`` are what a
    snippet centres on.
    """

    all_terms: str
    any_terms: str
    terms: tuple[str, ...]
    lexemes: tuple[str, ...] = ()
    weights: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class _Piece:
    """One token of a query: how it must match, what makes it a candidate, its slots, its ranked lexemes."""

    match: str
    loose: tuple[str, ...]
    chain: tuple[tuple[str, int], ...]
    width: int
    ranked: tuple[tuple[str, float], ...]
    stop: bool = False


def index_slots(text: str, first_slot: int = 1) -> list[tuple[str, int]]:
    """Lexemes of a document with their word slots, repeats kept so ranking sees term frequency."""
    pairs: list[tuple[str, int]] = []
    slot = first_slot
    for match in _TOKEN.finditer(_normalise(text)):
        run = match["cjk"]
        if run is None:
            terms, width, _ = _word_slots(match["word"])
            pairs.extend((lexeme, slot + offset) for lexeme, offset in terms)
            slot += width
        else:
            pairs.extend(zip(_bigrams(run), range(slot, slot + len(run) - 1), strict=True))
            pairs.extend(zip(run, range(slot, slot + len(run)), strict=True))
            slot += len(run)
    return pairs


def index_terms(text: str) -> list[str]:
    """Lexemes of a document in reading order (a CJK run's bigrams before its unigrams)."""
    return [lexeme for lexeme, _ in index_slots(text)]


def message_vector(text: str, sender_name: str | None = None) -> str:
    """The tsvector literal of a message: the sender's name first, then (a slot apart) its text.

    The one definition of what a message puts in the index; the name makes "what did Alice say about…"
    rank Alice's messages first without matching across into the text as a phrase.
    """
    slots: dict[str, list[int]] = {}  # each term's slots in first-seen order, what `slots_literal` groups by
    implied: set[str] = set()  # CJK unigrams that start a bigram: weighted C (the module's docstring)
    end, clean = _add_slots(sender_name, 1, slots, implied) if sender_name else (1, True)
    first = end + 1 if end > 1 else 1  # a slot apart from the name, if it had any term
    if not (_add_slots(text, first, slots, implied)[1] and clean):  # rare: a term to clean or cut (`slots_literal`)
        pairs = [*(index_slots(sender_name) if sender_name else []), *index_slots(text, first)]
        return _made_safe_literal(pairs, implied)
    return _render_slots(slots, implied)


def _add_slots(text: str, slot: int, slots: dict[str, list[int]], implied: set[str]) -> tuple[int, bool]:
    """`index_slots` grouped by term as it goes (no list of pairs in between), each CJK character followed by another
    added to `implied`; returns the slot after the text and whether every term is clean as it stands (what
    `slots_literal` checks: a CJK unigram or bigram always is)."""
    clean = True
    for cjk, word in _TOKEN.findall(_normalise(text)):
        if cjk:
            width = len(cjk)
            implied.update(cjk[:-1])
            for offset, term in enumerate(_bigrams(cjk)):  # a run's bigrams come before its unigrams
                where = slots.get(term)
                if where is None:
                    slots[term] = [slot + offset]
                else:
                    where.append(slot + offset)
            for offset, term in enumerate(cjk):
                where = slots.get(term)
                if where is None:
                    slots[term] = [slot + offset]
                else:
                    where.append(slot + offset)
        else:
            terms, width, clean_word = _word_slots(word)
            clean = clean and clean_word
            for term, offset in terms:
                where = slots.get(term)
                if where is None:
                    slots[term] = [slot + offset]
                else:
                    where.append(slot + offset)
        slot += width
    return slot, clean


def to_tsvector_text(terms: Iterable[str]) -> str:
    """Space-joined lexemes for ``to_tsvector('simple', $1)``, stripped of tsvector/tsquery syntax."""
    return " ".join(_safe_terms(terms))


_MAX_POSITION = 16383  # tsvector positions saturate here
_MAX_POSITIONS = 256  # and a lexeme keeps at most this many


def slots_literal(pairs: Iterable[tuple[str, int]]) -> str:
    """A tsvector in its input syntax (``'lexeme':1,4 …``) for a ``$1::tsvector`` cast.

    Unlike ``to_tsvector``, the cast never re-parses: what the tokenizer produced is exactly what is
    indexed, whatever the database's locale thinks a letter is, so index and ``::tsquery`` agree.
    """
    pairs = pairs if isinstance(pairs, list) else list(pairs)
    slots: dict[str, list[int]] = {}  # each distinct term once: a message repeats few of its terms
    for term, slot in pairs:
        where = slots.get(term)
        if where is None:
            slots[term] = [slot]
        else:
            where.append(slot)
    if "" in slots or max(map(len, slots), default=0) > MAX_TERM_CHARS or _UNSAFE.search("".join(slots)):
        return _made_safe_literal(pairs)  # rare: a term to clean or cut, which may then equal another term
    return _render_slots(slots)


def _render_slots(slots: dict[str, list[int]], implied: Set[str] = frozenset()) -> str:
    """The literal of clean terms with their slots (`slots_literal`), every position of an `implied` term weighted C."""
    return " ".join([
        (f"'{term}':{where[0]}C" if term in implied else f"'{term}':{where[0]}")
        if len(where) == 1 and where[0] <= _MAX_POSITION
        else (f"'{term}':{_slot_list(where, 'C,')}C" if term in implied else f"'{term}':{_slot_list(where)}")
        for term, where in slots.items()
    ])  # fmt: skip


def _slot_list(slots: list[int], separator: str = ",") -> str:
    """A term's positions in first-seen order, saturated, without repeats, at most `_MAX_POSITIONS`."""
    return separator.join(map(str, list(dict.fromkeys(min(slot, _MAX_POSITION) for slot in slots))[:_MAX_POSITIONS]))


def _made_safe_literal(pairs: Iterable[tuple[str, int]], implied: Set[str] = frozenset()) -> str:
    """`slots_literal` of terms that need cleaning: each occurrence cleaned and cut, then merged by what it became."""
    positions: dict[str, list[int]] = {}
    for term, slot in pairs:
        safe = _UNSAFE.sub("", term)[:MAX_TERM_CHARS]
        if safe:
            positions.setdefault(safe, []).append(slot)
    return _render_slots(positions, implied)


def to_tsvector_literal(terms: Iterable[str]) -> str:
    """A tsvector literal of terms at consecutive positions (see ``slots_literal``)."""
    return slots_literal((term, index) for index, term in enumerate(terms, 1))


def query_terms(text: str) -> list[str]:
    """Distinct lexemes a query ranks by, in order; also what a snippet should centre on."""
    query = build_query(text)
    return [] if query is None else list(query.terms)


def to_tsquery(text: str) -> str | None:
    """The all-terms tsquery of a free-text query, or None when nothing in it is searchable."""
    query = build_query(text)
    return None if query is None else query.all_terms


def build_query(text: str) -> SearchQuery | None:
    """AND and OR tsqueries and the ranked lexemes of a free-text query; None if nothing is searchable.

    ``"quoted phrases"`` must match in order; function words are dropped unless they are all there is.
    """
    pieces = _query_pieces(text)
    content = [piece for piece in pieces if not piece.stop] or pieces
    if not content:
        return None
    content = content[:_MAX_CLAUSES]
    weights: dict[str, float] = {}
    for piece in content:
        for lexeme, weight in piece.ranked:
            weights[lexeme] = weights.get(lexeme, 0.0) + weight
    loose = list(dict.fromkeys(operand for piece in content for operand in piece.loose))
    return SearchQuery(
        all_terms=" & ".join(dict.fromkeys(piece.match for piece in content)),
        any_terms=" | ".join(loose[:_MAX_CLAUSES]),
        terms=tuple(weights),
        lexemes=tuple(weights),
        weights=tuple(round(weight, 4) for weight in weights.values()),
    )


def without_phrases(text: str) -> str:
    """The query with its quotes taken out: the words of phrases that matched nothing, asked alone."""
    return text.translate(_QUOTES).replace('"', " ")


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
def _word_slots(token: str) -> tuple[tuple[tuple[str, int], ...], int, bool]:
    """A plain word with its stem in one slot, or an identifier whole and then each part in its own
    slot (the whole shares the first); how many slots the token takes; and whether every term is clean
    (not empty, not too long, nothing `_UNSAFE`), so `message_vector` needs no check of its own. Cached per token."""
    parts = _JOINERS.split(token)
    whole = ((token[:MAX_TERM_CHARS], 0),) if len(parts) > 1 else ()
    forms = tuple((form, offset) for offset, part in enumerate(parts) for form in _forms(part[:MAX_TERM_CHARS]))
    terms = whole + forms
    clean = all(term and len(term) <= MAX_TERM_CHARS and _UNSAFE.search(term) is None for term, _ in terms)
    return terms, len(parts), clean


def _safe_terms(terms: Iterable[str]) -> Iterator[str]:
    """Terms from any source made safe as lexemes: no whitespace, quotes or tsquery operators."""
    for term in terms:
        safe = _UNSAFE.sub("", term)[:MAX_TERM_CHARS]
        if safe:
            yield safe


def _query_pieces(text: str) -> list[_Piece]:
    """Splits on double quotes: odd segments are phrases, an unmatched quote is just punctuation."""
    segments = _normalise(text).translate(_QUOTES).split('"')
    pieces: list[_Piece] = []
    for index, segment in enumerate(segments):
        inner = _scan(segment)
        if index % 2 == 1 and index < len(segments) - 1:
            pieces.extend([_phrase(inner)] if inner else [])
        else:
            pieces.extend(inner)
    return pieces


def _scan(text: str) -> list[_Piece]:
    """Pieces of already normalised text, one per token."""
    pieces: list[_Piece] = []
    for match in _TOKEN.finditer(text):
        run = match["cjk"]
        if run is not None:
            pieces.append(_cjk_piece(run))
        elif _JOINERS.search(match["word"]) is not None:
            pieces.append(_identifier_piece(match["word"]))
        else:
            pieces.append(_word_piece(match["word"][:MAX_TERM_CHARS]))
    return pieces


def _word_piece(word: str) -> _Piece:
    """A word matches its exact form or its stem; the stem ranks, the exact form adds a little."""
    clause = _forms(word)
    operand = _render(clause)
    ranked = ((clause[1], 1.0), (clause[0], EXACT_WEIGHT)) if len(clause) > 1 else ((word, 1.0),)
    return _Piece(operand, (operand,), ((operand, 0),), 1, ranked, stop=word in STOPWORDS)


def _identifier_piece(token: str) -> _Piece:
    """An identifier matches whole, or as its parts in order (a host inside a URL, a name in a path)."""
    parts = [part[:MAX_TERM_CHARS] for part in _JOINERS.split(token)]
    whole = _quote(token[:MAX_TERM_CHARS])
    operand = f"({whole} | {' <-> '.join(map(_quote, parts))})"
    ranked = ((token[:MAX_TERM_CHARS], 1.0), *((part, PART_WEIGHT / len(parts)) for part in parts))
    return _Piece(operand, (operand,), ((whole, 0),), len(parts), ranked)


def _cjk_piece(run: str) -> _Piece:
    """A CJK run: one character matches its unigram; longer runs every bigram (any one for candidates)."""
    if len(run) == 1:
        operand = _quote(run)
        return _Piece(operand, (operand,), ((operand, 0),), 1, ((run, 1.0),))
    bigrams = _bigrams(run)
    distinct = list(dict.fromkeys(map(_quote, bigrams)))
    chain = tuple((_quote(bigram), offset) for offset, bigram in enumerate(bigrams))
    return _Piece(" & ".join(distinct), tuple(distinct), chain, len(run), tuple((b, 1.0) for b in bigrams))


def _phrase(pieces: list[_Piece]) -> _Piece:
    """Pieces in order at their slot distances: ``'support' <-> 'group'``, ``'上海' <-> '海参' <2> '会'``."""
    items: list[tuple[str, int]] = []
    base = 0
    for piece in pieces:
        items.extend((operand, base + offset) for operand, offset in piece.chain)
        base += piece.width
    rendered = items[0][0]
    for (operand, offset), (_, previous) in zip(items[1:], items, strict=False):
        distance = offset - previous
        rendered += f" {'<->' if distance == 1 else f'<{distance}>'} {operand}"
    match = f"({rendered})" if len(items) > 1 else rendered
    content = [piece for piece in pieces if not piece.stop] or pieces
    ranked = tuple(pair for piece in content for pair in piece.ranked)
    return _Piece(match, (match,), ((match, 0),), base, ranked)


def _quote(lexeme: str) -> str:
    """Quotes a lexeme, so nothing a user typed is ever read as tsquery syntax."""
    return "'" + _UNSAFE.sub("", lexeme).replace("'", "''") + "'"


def _render(clause: _Clause) -> str:
    quoted = [_quote(lexeme) for lexeme in clause]
    return quoted[0] if len(quoted) == 1 else "(" + " | ".join(quoted) + ")"
