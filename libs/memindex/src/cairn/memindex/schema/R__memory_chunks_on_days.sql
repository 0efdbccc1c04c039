-- Chunks dated on the days a memory question names, read from the month-day index.
-- Defined so by migration 0107_memory_chunks_by_month_day.
--
-- Under row-level security the index cannot serve the query of cairn_app: the day's expression is not LEAKPROOF
-- (to_char is not, and only a superuser may mark it), so Postgres evaluates it after the tenant policy, over
-- every chunk of the tenant (as 0031 says of `@@`). The read runs as the owner, answering only for the tenant of
-- the calling transaction, like matching_memory_chunks.
CREATE OR REPLACE FUNCTION indexer.memory_chunks_on_days(
    p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_days text[], p_limit int
)
RETURNS TABLE (chunk_id uuid)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
    SELECT c.chunk_id
    FROM indexer.memory_chunks c
    WHERE c.tenant_id = p_tenant AND p_tenant = cairn.current_tenant() AND c.agent_id = p_agent
      AND c.source = ANY(p_sources) AND (p_exclude_session_key IS NULL OR c.session_key IS DISTINCT FROM p_exclude_session_key)
      AND indexer.memory_month_day(c.dated, c.occurred_at) = ANY(p_days)
    ORDER BY c.occurred_at, c.start_line, c.chunk_id
    LIMIT p_limit
$$;

REVOKE ALL ON FUNCTION indexer.memory_chunks_on_days(uuid, text, text[], text, text[], int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.memory_chunks_on_days(uuid, text, text[], text, text[], int) TO cairn_app;
