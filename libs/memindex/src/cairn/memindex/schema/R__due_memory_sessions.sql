-- Remembered sessions whose quiet time is over, most overdue first, across tenants (the memory worker's look).
-- Defined so by migration 0042_due_memory_sessions_in_one_query.
--
-- From that migration's header:
-- The memory worker looks for due sessions every second (issue 5's debounce). The function set each tenant
-- in turn and probed its pending rows: one query per tenant, ~250 ms of database CPU per look at 1,000
-- tenants, whether or not anything was due, growing with the tenant count. It now reads the (due_at) index
-- once, as the owner, for whom indexer.memory_pending is no longer forced (as 0017/0031 did for matching):
-- the most overdue sessions first, at most p_limit in all (it was p_limit per tenant; the worker asks again
-- while it finds work). cairn_app and cairn_projector still see the table only through its policies.
CREATE OR REPLACE FUNCTION indexer.due_memory_sessions(p_limit int)
RETURNS TABLE (tenant_id uuid, agent_id text, session_id uuid)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = indexer, pg_temp AS $$
    SELECT p.tenant_id, p.agent_id, p.session_id FROM indexer.memory_pending p
    WHERE p.due_at <= now() ORDER BY p.due_at LIMIT p_limit
$$;

REVOKE ALL ON FUNCTION indexer.due_memory_sessions(int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.due_memory_sessions(int) TO cairn_app;
