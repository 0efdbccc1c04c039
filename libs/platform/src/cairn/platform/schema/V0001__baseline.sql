-- The platform's shared plumbing (schema cairn): the service roles, row-level security by tenant, and the
-- records of the exactly-once projection (processed events, outbox).
-- The squash of migrations 0001-0151 (see tests/integration/schema/): today's schema in one file.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cairn_app') THEN
        -- Services connect as this role: it owns nothing and cannot bypass row-level security.
        CREATE ROLE cairn_app LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cairn_projector') THEN
        -- The projections (session, indexer) connect as this one: cairn_app's privileges, plus the policy
        -- `tenant_batch` that admits the set of tenants of a fetched batch (see cairn.admit_tenant_batches).
        CREATE ROLE cairn_projector LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
END
$$;
GRANT cairn_app TO cairn_projector;

-- The runner's ledger (cairn.schema_versions) may have created the schema already.
CREATE SCHEMA IF NOT EXISTS cairn;
GRANT USAGE ON SCHEMA cairn TO cairn_app;

-- The tenant of the current transaction; NULL (no rows visible) when a service forgot to set it.
CREATE FUNCTION cairn.current_tenant() RETURNS uuid
LANGUAGE sql STABLE AS $$ SELECT nullif(current_setting('cairn.tenant_id', true), '')::uuid $$;
GRANT EXECUTE ON FUNCTION cairn.current_tenant() TO cairn_app;

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

CREATE FUNCTION cairn.isolate_by_tenant(tbl regclass, force boolean DEFAULT true) RETURNS void
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

-- Events a handler emitted, stored with its rows so a crash between commit and publish re-publishes them.
-- Ingest throughput (issue 4): a projection's outbox keeps each emitted event as the text it publishes, not as
-- jsonb. The outbox is written for every event the session service emits (one `transcript.appended` per message,
-- the message's text included) and read back only on a redelivery, which decodes it as JSON text anyway; jsonb
-- made Postgres parse and convert every event on the way in. Micro A/B (64-row INSERT ... FROM unnest of
-- transcript events, alternated, load ~11): jsonb 133, json 102, text 71 us per row (wall, median of 6 rounds).
-- Rows stored before are converted by jsonb's own output (still the same event when decoded).
--
-- Rewrites the table under an exclusive lock: it holds only the records still inside the retention window
-- (`CAIRN_NATS__PROCESSED_RETENTION_H`), so seconds, during which projections wait.
CREATE TABLE cairn.outbox (
    consumer text NOT NULL,
    causation_id uuid NOT NULL,
    seq integer NOT NULL,
    tenant_id uuid NOT NULL,
    event text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT outbox_pkey PRIMARY KEY (consumer, causation_id, seq)
);
SELECT cairn.isolate_by_tenant('cairn.outbox');
CREATE POLICY delete_old_records ON cairn.outbox FOR DELETE TO cairn_owner USING ((created_at < (now() - '01:00:00'::interval)));
CREATE POLICY sweep_old_records ON cairn.outbox FOR SELECT TO cairn_owner USING ((created_at < (now() - '01:00:00'::interval)));

-- (consumer, event_id) recorded in the same transaction as a projection's rows: redelivery is a no-op.
CREATE TABLE cairn.processed_events (
    consumer text NOT NULL,
    event_id uuid NOT NULL,
    tenant_id uuid NOT NULL,
    processed_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT processed_events_pkey PRIMARY KEY (consumer, event_id)
);
SELECT cairn.isolate_by_tenant('cairn.processed_events');
CREATE POLICY delete_old_records ON cairn.processed_events FOR DELETE TO cairn_owner USING ((processed_at < (now() - '01:00:00'::interval)));
CREATE POLICY sweep_old_records ON cairn.processed_events FOR SELECT TO cairn_owner USING ((processed_at < (now() - '01:00:00'::interval)));

GRANT SELECT,INSERT,DELETE ON TABLE cairn.outbox TO cairn_app;
GRANT SELECT,INSERT,DELETE ON TABLE cairn.processed_events TO cairn_app;

-- The records that make projections exactly-once (cairn.processed_events, and the outbox stored with them)
-- are needed while an event can still come again: a redelivery after a crash (within ack_wait), or a late
-- duplicate publish. Kept forever they would be the largest tables of all (a row per event per consumer),
-- so each service deletes its consumers' records older than a retention (`CAIRN_PROCESSED_KEEP_H`, days by
-- default). A replay from the stream's start rebuilds a projection from empty tables, records included,
-- so it never needs old records.
--
-- The services' roles may not cross tenants, so the deletion is one SECURITY DEFINER function run as the
-- owner, for whom these tables stay FORCE'd: two policies let the owner see and delete records that are at
-- least an hour old, and nothing else. No setting can make a sweep delete a record a redelivery may still
-- need.
CREATE INDEX processed_events_by_age ON cairn.processed_events USING brin (processed_at);
