-- Fact-level search (issue 30): every memory document is cut into its entries (cairn.memindex.entries), and the
-- headings and parent items above an entry ("## Diet", "- Pets:") are its context rather than an entry of their
-- own. The context is searched with the entry (its words are in `terms`, its vector was made of both) but is not
-- among the entry's lines, so it is kept here: a re-embedding (another model) embeds the same text again.
-- NULL for transcript chunks, for entries under no heading and for chunks written before this version (until
-- `cairn reindex --documents` or the document's next version re-chunks them).
ALTER TABLE indexer.memory_chunks ADD COLUMN context text;
