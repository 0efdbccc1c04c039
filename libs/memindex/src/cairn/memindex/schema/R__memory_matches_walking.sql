CREATE OR REPLACE FUNCTION indexer.memory_matches_walking(
    p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap int
)
RETURNS TABLE (chunk_id uuid, terms tsvector)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_custom_plan
SET enable_bitmapscan = off
SET enable_seqscan = off
SET enable_sort = off
AS $$
    SELECT c.chunk_id, c.terms
    FROM indexer.memory_chunks c
    WHERE c.tenant_id = p_tenant AND p_tenant = cairn.current_tenant() AND c.agent_id = p_agent
      AND c.source = ANY(p_sources) AND (p_exclude_session_key IS NULL OR c.session_key IS DISTINCT FROM p_exclude_session_key)
      AND c.terms @@ p_query
    ORDER BY c.occurred_at DESC NULLS LAST, c.chunk_id
    LIMIT p_cap
$$;
REVOKE ALL ON FUNCTION indexer.memory_matches_walking(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap integer) FROM PUBLIC;
