"""Text handling shared by cairn's services: full-text tokenization and secret redaction."""

from cairn.text.redaction import mask, redact, snippet
from cairn.text.tokenizer import (
    MAX_TERM_CHARS,
    STOPWORDS,
    SearchQuery,
    build_query,
    index_slots,
    index_terms,
    message_vector,
    query_terms,
    slots_literal,
    to_tsquery,
    to_tsvector_literal,
    to_tsvector_text,
    without_phrases,
)

__all__ = [
    "MAX_TERM_CHARS",
    "STOPWORDS",
    "SearchQuery",
    "build_query",
    "index_slots",
    "index_terms",
    "mask",
    "message_vector",
    "query_terms",
    "redact",
    "slots_literal",
    "snippet",
    "to_tsquery",
    "to_tsvector_literal",
    "to_tsvector_text",
    "without_phrases",
]
