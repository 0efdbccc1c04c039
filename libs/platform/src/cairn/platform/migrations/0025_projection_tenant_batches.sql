-- Projections apply a fetched batch of many tenants' events in one transaction: set-based statements over
-- the whole batch instead of one transaction (~10 round trips) per tenant.
--
-- They log in as `cairn_projector`, which inherits cairn_app's privileges. For that role only, a second
-- policy admits the set of tenants named in the transaction-local setting `cairn.tenant_ids`, on the tables
-- of the schemas the projection services (session, indexer) write: cairn, session, indexer — including
-- tables created later through `cairn.isolate_by_tenant`, whose writes (triggers too) share the batch's
-- transaction. Every other role (cairn_app: the HTTP-facing services) is still filtered by
-- `tenant_isolation` alone, so a stray `cairn.tenant_ids` changes nothing for them, nor their query plans.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cairn_projector') THEN
        CREATE ROLE cairn_projector LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
END
$$;
GRANT cairn_app TO cairn_projector;

-- The tenants of the current projection transaction; NULL (no rows) when none were set.
CREATE FUNCTION cairn.batch_tenants() RETURNS uuid[]
LANGUAGE sql STABLE AS $$ SELECT string_to_array(nullif(current_setting('cairn.tenant_ids', true), ''), ',')::uuid[] $$;
GRANT EXECUTE ON FUNCTION cairn.batch_tenants() TO cairn_app;

-- The sub-select makes the set an InitPlan: parsed once per statement, not once per row.
CREATE FUNCTION cairn.admit_tenant_batches(tbl regclass) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('CREATE POLICY tenant_batch ON %s TO cairn_projector '
                   'USING (tenant_id = ANY((SELECT cairn.batch_tenants())::uuid[])) '
                   'WITH CHECK (tenant_id = ANY((SELECT cairn.batch_tenants())::uuid[]))', tbl);
END
$$;

CREATE OR REPLACE FUNCTION cairn.isolate_by_tenant(tbl regclass, force boolean DEFAULT true) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', tbl);
    IF force THEN
        EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', tbl);
    END IF;
    EXECUTE format('CREATE POLICY tenant_isolation ON %s USING (tenant_id = cairn.current_tenant()) '
                   'WITH CHECK (tenant_id = cairn.current_tenant())', tbl);
    IF (SELECT relnamespace::regnamespace::text FROM pg_class WHERE oid = tbl) IN ('cairn', 'session', 'indexer') THEN
        PERFORM cairn.admit_tenant_batches(tbl);
    END IF;
END
$$;

SELECT cairn.admit_tenant_batches(format('%I.%I', schemaname, tablename)::regclass)
FROM pg_policies
WHERE policyname = 'tenant_isolation' AND schemaname IN ('cairn', 'session', 'indexer');
