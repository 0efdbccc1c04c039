-- Memory search at scale (issue 5), the same fix as 0016/0017 for session search. Under row-level
-- security `terms @@ q` could never use the full-text index: `@@` is not LEAKPROOF (and only a superuser
-- may mark it), so Postgres evaluated it after the tenant policy, as a filter over every chunk of the
-- tenant, and ranked every match. Matching therefore runs in a SECURITY DEFINER function as the owner, for
-- whom indexer.memory_chunks is no longer forced, over a (tenant_id, terms) index (btree_gin, 0016).
-- Isolation holds: the function answers only for the tenant of the calling transaction
-- (cairn.current_tenant()), and cairn_app still sees the table through the policy everywhere else.
-- Candidates are the most recent `cap` matches of one agent (a chunk's time: the document write or the
-- conversation's first turn; undated rows last): (tenant, agent, occurred_at) lets a frequent term find
-- them by walking back in time instead of reading and sorting every match.
DROP INDEX IF EXISTS indexer.memory_chunks_terms;
CREATE INDEX memory_chunks_tenant_terms ON indexer.memory_chunks USING gin (tenant_id, terms);
CREATE INDEX memory_chunks_recent ON indexer.memory_chunks (tenant_id, agent_id, occurred_at DESC NULLS LAST, chunk_id);
ALTER TABLE indexer.memory_chunks NO FORCE ROW LEVEL SECURITY;

CREATE FUNCTION indexer.matching_memory_chunks(
    p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap int
)
RETURNS TABLE (chunk_id uuid, terms tsvector)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
    SELECT c.chunk_id, c.terms
    FROM indexer.memory_chunks c
    WHERE c.tenant_id = p_tenant AND p_tenant = cairn.current_tenant() AND c.agent_id = p_agent
      AND c.source = ANY(p_sources) AND (p_exclude_session_key IS NULL OR c.session_key IS DISTINCT FROM p_exclude_session_key)
      AND c.terms @@ p_query
    ORDER BY c.occurred_at DESC NULLS LAST, c.chunk_id
    LIMIT p_cap
$$;
REVOKE ALL ON FUNCTION indexer.matching_memory_chunks(uuid, text, text[], text, tsquery, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.matching_memory_chunks(uuid, text, text[], text, tsquery, int) TO cairn_app;
