-- The audit log as the operator reads it (admin token only): across tenants or of one, from `p_since`, oldest
-- first. Run as the table owner: the services may only append to the log.
CREATE OR REPLACE FUNCTION ingest.audit_entries(p_tenant_id uuid, p_since timestamp with time zone, p_limit integer)
RETURNS TABLE (at timestamp with time zone, actor text, tenant_id uuid, action text, target text, client text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ingest, pg_temp AS $$
    SELECT a.at, a.actor, a.tenant_id, a.action, a.target, a.client FROM ingest.audit_log a
    WHERE (p_tenant_id IS NULL OR a.tenant_id = p_tenant_id) AND (p_since IS NULL OR a.at >= p_since)
    ORDER BY a.at, a.entry_id
    LIMIT p_limit
$$;

REVOKE ALL ON FUNCTION ingest.audit_entries(uuid, timestamp with time zone, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ingest.audit_entries(uuid, timestamp with time zone, integer) TO cairn_app;
