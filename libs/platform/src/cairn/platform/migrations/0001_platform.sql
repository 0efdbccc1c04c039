-- Shared plumbing: the service role, row-level security helper, processed events and outbox.
CREATE EXTENSION IF NOT EXISTS vector;

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cairn_app') THEN
        -- Services connect as this role: it owns nothing and cannot bypass row-level security.
        CREATE ROLE cairn_app LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
END
$$;

CREATE SCHEMA IF NOT EXISTS cairn;

-- The tenant of the current transaction; NULL (no rows visible) when a service forgot to set it.
CREATE OR REPLACE FUNCTION cairn.current_tenant() RETURNS uuid
LANGUAGE sql STABLE AS $$ SELECT nullif(current_setting('cairn.tenant_id', true), '')::uuid $$;

-- Row-level security by tenant, the same for every table with a tenant_id, checked on writes too.
-- Forced by default, so even the table owner is filtered; `force => false` only where a SECURITY
-- DEFINER function (running as the owner) must read across tenants, as API-key lookup must.
CREATE FUNCTION cairn.isolate_by_tenant(tbl regclass, force boolean DEFAULT true) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', tbl);
    IF force THEN
        EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', tbl);
    END IF;
    EXECUTE format('CREATE POLICY tenant_isolation ON %s USING (tenant_id = cairn.current_tenant()) '
                   'WITH CHECK (tenant_id = cairn.current_tenant())', tbl);
END
$$;

-- (consumer, event_id) recorded in the same transaction as a projection's rows: redelivery is a no-op.
CREATE TABLE cairn.processed_events (
    consumer     text        NOT NULL,
    event_id     uuid        NOT NULL,
    tenant_id    uuid        NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);

-- Events a handler emitted, stored with its rows so a crash between commit and publish re-publishes them.
CREATE TABLE cairn.outbox (
    consumer     text        NOT NULL,
    causation_id uuid        NOT NULL,
    seq          int         NOT NULL,
    tenant_id    uuid        NOT NULL,
    event        jsonb       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, causation_id, seq)
);

SELECT cairn.isolate_by_tenant('cairn.processed_events');
SELECT cairn.isolate_by_tenant('cairn.outbox');

GRANT USAGE ON SCHEMA cairn TO cairn_app;
GRANT SELECT, INSERT, DELETE ON cairn.processed_events, cairn.outbox TO cairn_app;
GRANT EXECUTE ON FUNCTION cairn.current_tenant() TO cairn_app;
