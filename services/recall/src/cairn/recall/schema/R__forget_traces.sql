-- The retention sweep of recall traces: up to `p_limit` traces (of every tenant) created before `p_before`; the
-- policies of recall.traces keep it from deleting anything younger than a day. Returns how many went.
CREATE OR REPLACE FUNCTION recall.forget_traces(p_before timestamptz, p_limit int) RETURNS int
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, recall AS $$
    WITH old AS (
        SELECT tenant_id, trace_id FROM recall.traces WHERE created_at < p_before LIMIT p_limit
    ), gone AS (
        DELETE FROM recall.traces t USING old WHERE t.tenant_id = old.tenant_id AND t.trace_id = old.trace_id
        RETURNING 1
    )
    SELECT count(*)::int FROM gone
$$;

REVOKE ALL ON FUNCTION recall.forget_traces(timestamptz, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION recall.forget_traces(timestamptz, int) TO cairn_app;
