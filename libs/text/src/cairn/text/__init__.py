"""Text handling shared by cairn's services: full-text tokenization and secret redaction."""

from cairn.text.redaction import mask, redact, snippet
from cairn.text.tokenizer import (
    MAX_TERM_CHARS,
    SearchQuery,
    build_query,
    index_terms,
    query_terms,
    to_tsquery,
    to_tsvector_literal,
    to_tsvector_text,
)

__all__ = [
    "MAX_TERM_CHARS",
    "SearchQuery",
    "build_query",
    "index_terms",
    "mask",
    "query_terms",
    "redact",
    "snippet",
    "to_tsquery",
    "to_tsvector_literal",
    "to_tsvector_text",
]
