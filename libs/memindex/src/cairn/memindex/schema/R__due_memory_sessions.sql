CREATE OR REPLACE FUNCTION indexer.due_memory_sessions(p_limit int)
RETURNS TABLE (tenant_id uuid, agent_id text, session_id uuid)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = indexer, pg_temp AS $$
    SELECT p.tenant_id, p.agent_id, p.session_id FROM indexer.memory_pending p
    WHERE p.due_at <= now() ORDER BY p.due_at LIMIT p_limit
$$;
REVOKE ALL ON FUNCTION indexer.due_memory_sessions(p_limit integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.due_memory_sessions(p_limit integer) TO cairn_app;
