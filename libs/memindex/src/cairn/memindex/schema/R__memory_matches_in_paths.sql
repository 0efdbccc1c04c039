-- Lane 1's way of matching_memory_chunks when its walk falls short (recall, issue 29): the matches of some paths,
-- read through the full-text keys' GIN as memory_matches_by_bitmap reads them, the paths kept inside the join.
--
-- matching_memory_chunks first walks the agent's newest 4 x cap chunks for `cap` matches of the paths. When they
-- hold fewer, the paths' matches are sparse, and it read them directly: every chunk of the agent's trusted paths,
-- each checked against the query. At 100,000 trusted entries that is every entry for a query whose every word is
-- rare together (the every-term half of lane 1's lexical statement): 119 ms, 25,074 buffers, for a few rows.
-- The keys' GIN reads only the chunks holding the query's words, of any path (the keys have no path); they are
-- sorted by recency and fetched by primary key, newest first, until `cap` of them are of the paths and match
-- `terms @@ query` (a phrase is checked on the chunk's own terms). Same rows: the most recent `cap` matches of
-- the paths, in the same order (occurred_at, chunk_id, which the keys copy from the chunks).
CREATE OR REPLACE FUNCTION indexer.memory_matches_in_paths(
    p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap int,
    p_paths text[]
)
RETURNS TABLE (chunk_id uuid, terms tsvector)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_custom_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_material = off
AS $$
    SELECT m.chunk_id, m.terms
    FROM (
        SELECT k.chunk_id, k.occurred_at
        FROM indexer.memory_chunk_keys k
        WHERE indexer.tenant_terms(k.tenant_id, k.lexemes) @@ indexer.tenant_terms_query(p_tenant, p_query)
          AND (k.tenant_id = p_tenant) IS TRUE AND p_tenant = cairn.current_tenant() AND (k.agent_id = p_agent) IS TRUE
          AND k.source = ANY(p_sources) AND (p_exclude_session_key IS NULL OR k.session_key IS DISTINCT FROM p_exclude_session_key)
        ORDER BY k.occurred_at DESC NULLS LAST, k.chunk_id
    ) newest
    CROSS JOIN LATERAL (
        SELECT c.chunk_id, c.terms FROM indexer.memory_chunks c
        WHERE c.tenant_id = p_tenant AND c.chunk_id = newest.chunk_id AND c.terms @@ p_query
          AND EXISTS (SELECT 1 FROM unnest(p_paths) p WHERE c.path = p OR (right(p, 1) = '/' AND starts_with(c.path, p)))
    ) m
    ORDER BY newest.occurred_at DESC NULLS LAST, newest.chunk_id
    LIMIT p_cap
$$;

REVOKE ALL ON FUNCTION indexer.memory_matches_in_paths(uuid, text, text[], text, tsquery, int, text[]) FROM PUBLIC;
