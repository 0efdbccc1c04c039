-- Transcript chunks also name their messages by the adapter's ids (what a client sent as message_id), in
-- the order of `message_ids`, so a client can map a hit back to its own records without another lookup.
ALTER TABLE indexer.memory_turns ADD COLUMN external_id text;
ALTER TABLE indexer.memory_chunks ADD COLUMN external_ids text[] NOT NULL DEFAULT '{}';

-- Each remembered turn also gets a vector of its own (no index: it is read by id only). A chunk of a
-- conversation averages twenty turns; the turn's own vector tells which of them a search is about, so
-- hits can list their most relevant messages first and score a chunk by its best turn too.
ALTER TABLE indexer.memory_turns ADD COLUMN model text;
ALTER TABLE indexer.memory_turns ADD COLUMN embedding vector;
