-- One way of matching_memory_chunks: the full-text keys' GIN as a bitmap, then the newest matches.
-- Defined so by migration 0135_memory_keys_in_a_narrow_table.
--
-- The keys' table has no other index the planner may take (its primary key cannot serve `IS TRUE`), so its GIN is
-- read as a bitmap; the chunks are then fetched by primary key in recency order until `cap` of them match.
CREATE OR REPLACE FUNCTION indexer.memory_matches_by_bitmap(
    p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap int
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
    ) m
    ORDER BY newest.occurred_at DESC NULLS LAST, newest.chunk_id
    LIMIT p_cap
$$;

REVOKE ALL ON FUNCTION indexer.memory_matches_by_bitmap(uuid, text, text[], text, tsquery, int) FROM PUBLIC;
