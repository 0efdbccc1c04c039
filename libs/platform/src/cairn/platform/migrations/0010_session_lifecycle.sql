-- Lifecycle: a session with no traffic becomes dormant, then archived; new traffic makes it active again.
-- Nothing is deleted: archived sessions stay readable and searchable.
--
-- The sweep runs for every tenant, so it is a SECURITY DEFINER function: as the owner it may list the
-- tenants (ingest.tenants is not forced), and it sets each tenant in turn, so row-level security still
-- scopes every UPDATE to one tenant. `p_tenant` limits a sweep to one tenant.
CREATE FUNCTION session.sweep_lifecycle(p_dormant_after interval, p_archive_after interval, p_tenant uuid DEFAULT NULL)
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
        UPDATE session.sessions SET status = 'archived'
        WHERE tenant_id = t AND status <> 'archived' AND updated_at < now() - p_archive_after;
        GET DIAGNOSTICS n = ROW_COUNT;
        archived := archived + n;
        UPDATE session.sessions SET status = 'dormant'
        WHERE tenant_id = t AND status = 'active' AND updated_at < now() - p_dormant_after;
        GET DIAGNOSTICS n = ROW_COUNT;
        dormant := dormant + n;
    END LOOP;
    PERFORM set_config('cairn.tenant_id', '', true);
    RETURN NEXT;
END
$$;

REVOKE ALL ON FUNCTION session.sweep_lifecycle(interval, interval, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION session.sweep_lifecycle(interval, interval, uuid) TO cairn_app;
CREATE INDEX sessions_lifecycle ON session.sessions (tenant_id, status, updated_at);
