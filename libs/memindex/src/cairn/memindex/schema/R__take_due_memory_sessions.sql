CREATE OR REPLACE FUNCTION indexer.take_due_memory_sessions(p_limit int)
RETURNS TABLE (tenant_id uuid, agent_id text, session_id uuid, finished boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = indexer, pg_temp AS $$
DECLARE
    dropped bigint;
BEGIN
    RETURN QUERY
    WITH forgetting AS (
        SELECT p.tenant_id, p.session_id FROM indexer.memory_pending p
        JOIN indexer.memory_agents a ON a.tenant_id = p.tenant_id AND a.agent_id = p.agent_id
        WHERE p.due_at <= now() AND NOT a.remember
        ORDER BY p.due_at LIMIT 1000
        FOR UPDATE OF p SKIP LOCKED
        FOR SHARE OF a SKIP LOCKED
    ), done AS (
        DELETE FROM indexer.memory_pending p USING forgetting f
        WHERE p.tenant_id = f.tenant_id AND p.session_id = f.session_id
        RETURNING p.tenant_id, p.agent_id, p.session_id
    )
    SELECT d.tenant_id, d.agent_id, d.session_id, true FROM done d;
    GET DIAGNOSTICS dropped = ROW_COUNT;
    IF dropped > 0 THEN
        PERFORM pg_notify('cairn_memory_progress', '');  -- as the worker's finish_pending does
    END IF;
    RETURN QUERY
    SELECT p.tenant_id, p.agent_id, p.session_id, false FROM indexer.memory_pending p
    LEFT JOIN indexer.memory_agents a ON a.tenant_id = p.tenant_id AND a.agent_id = p.agent_id
    WHERE p.due_at <= now() AND (a.remember IS NOT FALSE OR dropped < 1000)
    ORDER BY p.due_at LIMIT p_limit;
END
$$;
REVOKE ALL ON FUNCTION indexer.take_due_memory_sessions(p_limit integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.take_due_memory_sessions(p_limit integer) TO cairn_app;
