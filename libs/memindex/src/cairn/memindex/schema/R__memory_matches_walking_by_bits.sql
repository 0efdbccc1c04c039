-- One way of matching_memory_chunks: walk back in time over the recency index's term bits, fetching only chunks
-- that can match.
-- Defined so by migration 0059_memory_matches_walk_by_term_bits.
--
-- From that migration's header:
-- Memory search speed (issue 5): a walk back in time reads only the chunks that can hold every required term.
-- Walking an agent's chunks costs a heap row per chunk (~3 us quiet, fetch and `@@`), and a conjunction that
-- matches 1% of a 100k-chunk agent walks ~28,000 of them to find the 300 most recent matches (the bench's
-- 10-word queries: most of memory search's p99). Now every chunk also keeps `term_bits`: one bit of 512 per
-- lexeme (a hash of it), a generated column, so every writer fills it. The recency index carries it (with
-- the source and session the walk filters on), and a walk for a query with required lexemes reads the index
-- only, keeps the chunks whose bits hold every required lexeme's bit, and fetches the row of those alone
-- (measured: 481 of 28,361 on the 10-word query, 1.1% of them real matches). A missing bit proves a missing
-- lexeme, so no match is ever skipped; a set bit may be another lexeme's, and the row's `terms @@ q` decides.
--
-- The required lexemes of a query are found without parsing its shape: a lexeme is required when the query
-- does not match all its other lexemes. Queries with NOT, phrases, prefixes or weights get no bits (a plain
-- walk), as presence alone does not decide them.
--
-- matching_memory_chunks (0058) now chooses among three ways from the agent's 128 newest chunks: a plain walk
-- when their match rate reaches the cap within PLAIN_WALK_ROWS chunks (a probe by primary key per kept chunk
-- costs more than the heap row the plain walk reads next), the walk by bits up to BITS_WALK_ROWS chunks
-- (an index entry costs ~1/5 of a heap row), else the full-text index.
--
-- Adding the column rewrites the table (and rebuilds its indexes, the HNSW graphs included): minutes per
-- million chunks, once.

-- One bit per lexeme (of 512, by hashtext): ~25 lexemes of a short chunk set ~5% of them, a 20-turn chunk ~30%.
CREATE OR REPLACE FUNCTION indexer.memory_matches_walking_by_bits(
    p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap int
)
RETURNS TABLE (chunk_id uuid, terms tsvector)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_custom_plan
SET enable_bitmapscan = off
SET enable_seqscan = off
SET enable_sort = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_material = off
AS $$
    SELECT m.chunk_id, m.terms
    FROM (
        SELECT c.chunk_id, c.occurred_at
        FROM indexer.memory_chunks c
        WHERE c.tenant_id = p_tenant AND p_tenant = cairn.current_tenant() AND c.agent_id = p_agent
          AND c.source = ANY(p_sources) AND (p_exclude_session_key IS NULL OR c.session_key IS DISTINCT FROM p_exclude_session_key)
          AND (c.term_bits & indexer.required_term_bits(p_query)) = indexer.required_term_bits(p_query)
        ORDER BY c.occurred_at DESC NULLS LAST, c.chunk_id
    ) kept
    CROSS JOIN LATERAL (
        SELECT r.chunk_id, r.terms FROM indexer.memory_chunks r
        WHERE r.tenant_id = p_tenant AND r.chunk_id = kept.chunk_id AND r.terms @@ p_query
    ) m
    ORDER BY kept.occurred_at DESC NULLS LAST, kept.chunk_id
    LIMIT p_cap
$$;

REVOKE ALL ON FUNCTION indexer.memory_matches_walking_by_bits(uuid, text, text[], text, tsquery, int) FROM PUBLIC;
