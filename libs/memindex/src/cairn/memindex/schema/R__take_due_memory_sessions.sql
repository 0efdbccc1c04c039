-- due_memory_sessions, dropping the marks of agents that do not remember instead of returning them.
-- Defined so by migration 0096_memory_due_sessions_of_agents_that_forget.
--
-- From that migration's header:
-- The memory worker took every due session in a tenant transaction of its own — BEGIN, claim the mark, read the
-- agent's remember setting, delete the mark, COMMIT: five round trips — also when the agent does not remember,
-- whose turns are kept (turning remember on chunks them, 0023) but whose sessions are never chunked. With
-- agents set to one session per channel peer (remember off by default) that was one such transaction for
-- nearly every quiet session: most of the worker's database traffic, for nothing to do.
--
-- The worker's one look for due sessions now also drops the due marks of agents that do not remember (at most
-- 1,000 a call), as the transaction did (same rows deleted, same notification), and lists them as finished; the
-- due sessions of agents that remember are returned to be chunked as before. A mark or setting another
-- transaction holds is skipped: when the call dropped fewer than its bound, such a session is listed as due and
-- the worker's own transaction decides, as before (when it reached the bound, the worker looks again at once).
-- The agent's setting is locked with the mark, so a setting turned on meanwhile is re-read (the statement then
-- leaves the mark alone). An agent with no stored setting remembers (its default config): never dropped here.
--
-- As the owner the function reads the agents' settings of every tenant (as 0042 did for the marks);
-- cairn_app and cairn_projector still see the table only through its policies.
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

REVOKE ALL ON FUNCTION indexer.take_due_memory_sessions(int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.take_due_memory_sessions(int) TO cairn_app;
