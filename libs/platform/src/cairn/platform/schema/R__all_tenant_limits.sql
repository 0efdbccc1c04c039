-- Every tenant's own limits (the operator's overrides), read across tenants.
-- Defined so by migration V0003__tenant_limits.
--
-- Each replica of each service reads them all every few seconds (cairn.edge.limit_store), one small read however
-- many tenants send requests; a tenant without a row is held to the deployment's defaults.
CREATE OR REPLACE FUNCTION cairn.all_tenant_limits() RETURNS TABLE (tenant_id uuid, limits jsonb)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, cairn AS $$
    SELECT tenant_id, limits FROM cairn.tenant_limits
$$;

REVOKE ALL ON FUNCTION cairn.all_tenant_limits() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cairn.all_tenant_limits() TO cairn_app;
