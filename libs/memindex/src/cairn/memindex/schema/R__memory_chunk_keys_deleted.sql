-- memory_chunk_keys follows memory_chunks: the narrow rows the full-text keys are read from.
-- Defined so by migration 0135_memory_keys_in_a_narrow_table.
--
-- From that migration's header:
-- Memory search speed (issue 5): the full-text keys' bitmap reads narrow rows, not the chunks themselves.
--
-- The bitmap way (memory_matches_by_bitmap, 0058) read every match's row from memory_chunks to sort the matches by
-- recency and keep the newest `cap`. A chunk of 20 conversation turns keeps 5-7 kB of terms in its row (0090), so a
-- row is a page: a question whose words are common in the agent ("What has Melanie painted?": thousands of the
-- realistic 100k seed's chunks) read thousands of heap pages (781 MB of heap against 128 MB of shared buffers),
-- 100-800 ms under load, for 300 rows. That is most of memory search's tail on the realistic seed
-- (`cairn bench memindex --part search --data ../shared/datasets/locomo`).
--
-- Now each chunk has a row in memory_chunk_keys: what the way filters and sorts by (agent, source, session key,
-- occurred_at) and its lexemes without positions (`strip(terms)`, stored out of line by TOAST: the row is about
-- 90 bytes, 9 MB of heap for 100k chunks). The full-text keys (tenant-qualified, 0039) are indexed there instead of
-- on memory_chunks, so the way reads the GIN, then the narrow rows of every match, sorts them by recency, and only
-- then fetches the chunks by primary key, newest first, until `cap` of them match `terms @@ query` (the row's own
-- terms still decide: a phrase `a <-> b` is `a & b` for the keys). Same rows (the most recent `cap` matches), same
-- signature and grants. Measured on the realistic 100k seed, 2 cores at load 4.7-6.7:
-- the way alone against a copy of the table of narrow rows, interleaved, 2 rounds of the bench's 161 distinct
-- questions: at the cap (170 calls) mean 94.6 -> 23.8 ms, median per-call ratio 0.36, all calls p99 543 -> 70 ms;
-- the whole lexical statement (LEXICAL_ROWS, dispatcher 0124 unchanged), old way B against this one A, AB/BA
-- alternating, 2 rounds of the 200 questions: p50 41.6 -> 38.9, p99 151.0 -> 112.6, mean 49.9 -> 42.2 ms,
-- median per-query ratio 0.94, identical ids and scores 400/400.
--
-- The rows are kept by statement triggers on memory_chunks (inserted, deleted: one statement each, with the
-- transition tables) and a row trigger for an update of a column it copies (not for a re-embedding). The functions
-- run as the owner: the service roles never read or write the table. Storage: the keys' TOAST is about the size of
-- the terms (~650 MB at 100k realistic chunks); the GIN over dense narrow rows is 57 MB against 133 MB over the chunks.
CREATE OR REPLACE FUNCTION indexer.memory_chunk_keys_deleted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = indexer, pg_temp
AS $$
BEGIN
    DELETE FROM indexer.memory_chunk_keys k USING removed o WHERE k.tenant_id = o.tenant_id AND k.chunk_id = o.chunk_id;
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION indexer.memory_chunk_keys_deleted() FROM PUBLIC;
CREATE OR REPLACE TRIGGER memory_chunk_keys_deleted AFTER DELETE ON indexer.memory_chunks
    REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT
    EXECUTE FUNCTION indexer.memory_chunk_keys_deleted();
