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

ALTER TABLE cairn.processed_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE cairn.processed_events FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON cairn.processed_events
    USING (tenant_id = cairn.current_tenant()) WITH CHECK (tenant_id = cairn.current_tenant());
ALTER TABLE cairn.outbox ENABLE ROW LEVEL SECURITY;
ALTER TABLE cairn.outbox FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON cairn.outbox
    USING (tenant_id = cairn.current_tenant()) WITH CHECK (tenant_id = cairn.current_tenant());

GRANT USAGE ON SCHEMA cairn TO cairn_app;
GRANT SELECT, INSERT, DELETE ON cairn.processed_events, cairn.outbox TO cairn_app;
GRANT EXECUTE ON FUNCTION cairn.current_tenant() TO cairn_app;
