-- Sessions quiet for long become dormant, then archived, by each agent's retention (or the deployment's defaults).
-- Defined so by migration 0012_session_policies_per_agent.
--
-- The lifecycle sweep now reads each agent's retention, falling back to the arguments (the deployment's
-- defaults). Same signature, so the grant of 0010 still applies.
CREATE OR REPLACE FUNCTION session.sweep_lifecycle(p_dormant_after interval, p_archive_after interval, p_tenant uuid DEFAULT NULL)
RETURNS TABLE (dormant bigint, archived bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = session, pg_temp AS $$
DECLARE
    t uuid;
    n bigint;
BEGIN
    dormant := 0;
    archived := 0;
    FOR t IN SELECT tenant_id FROM ingest.tenants WHERE p_tenant IS NULL OR tenant_id = p_tenant LOOP
        PERFORM set_config('cairn.tenant_id', t::text, true);
        UPDATE session.sessions s SET status = 'archived'
        FROM (
            SELECT d.agent_id, coalesce(a.archive_after, p_archive_after) AS after
            FROM (SELECT DISTINCT agent_id FROM session.sessions WHERE tenant_id = t AND status <> 'archived') d
            LEFT JOIN session.agent_settings a ON a.tenant_id = t AND a.agent_id = d.agent_id
        ) r
        WHERE s.tenant_id = t AND s.agent_id = r.agent_id AND s.status <> 'archived' AND s.updated_at < now() - r.after;
        GET DIAGNOSTICS n = ROW_COUNT;
        archived := archived + n;
        UPDATE session.sessions s SET status = 'dormant'
        FROM (
            SELECT d.agent_id, coalesce(a.dormant_after, p_dormant_after) AS after
            FROM (SELECT DISTINCT agent_id FROM session.sessions WHERE tenant_id = t AND status = 'active') d
            LEFT JOIN session.agent_settings a ON a.tenant_id = t AND a.agent_id = d.agent_id
        ) r
        WHERE s.tenant_id = t AND s.agent_id = r.agent_id AND s.status = 'active' AND s.updated_at < now() - r.after;
        GET DIAGNOSTICS n = ROW_COUNT;
        dormant := dormant + n;
    END LOOP;
    PERFORM set_config('cairn.tenant_id', '', true);
    RETURN NEXT;
END
$$;

REVOKE ALL ON FUNCTION session.sweep_lifecycle(interval, interval, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION session.sweep_lifecycle(interval, interval, uuid) TO cairn_app;
