"""Text handling shared by cairn's services: full-text tokenization, secret redaction, recall intent and the
dates a message names."""

from cairn.text.dates import ResolvedDate, first_date, resolve_dates
from cairn.text.recall_intent import Intent, intent_of, seeks_memory
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
    "Intent",
    "ResolvedDate",
    "SearchQuery",
    "build_query",
    "first_date",
    "index_slots",
    "index_terms",
    "intent_of",
    "mask",
    "message_vector",
    "query_terms",
    "redact",
    "resolve_dates",
    "seeks_memory",
    "slots_literal",
    "snippet",
    "to_tsquery",
    "to_tsvector_literal",
    "to_tsvector_text",
    "without_phrases",
]
