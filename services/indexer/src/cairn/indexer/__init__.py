"""The indexer service: projects transcripts (and later memory documents) into search tables."""
