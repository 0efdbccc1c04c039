-- Key lifecycle (issue 31): each key has an id, a name, scopes, optionally a list of agents and an expiry, and
-- when it was last used. Keys created before keep working with every scope (the column defaults), as does the
-- first key of a new tenant. Keys are still stored only as hashes; the prefix is the one part kept in clear.
ALTER TABLE ingest.api_keys
    ADD COLUMN key_id uuid DEFAULT gen_random_uuid() NOT NULL,
    ADD COLUMN name text DEFAULT 'default' NOT NULL,
    ADD COLUMN scopes text[] DEFAULT ARRAY['write', 'read', 'memory:write', 'admin'] NOT NULL,
    ADD COLUMN agents text[],
    ADD COLUMN expires_at timestamp with time zone,
    ADD COLUMN last_used_at timestamp with time zone,
    ADD CONSTRAINT api_keys_key_id_key UNIQUE (key_id),
    ADD CONSTRAINT api_keys_name_check CHECK (((length(name) >= 1) AND (length(name) <= 200))),
    ADD CONSTRAINT api_keys_scopes_check
        CHECK (((cardinality(scopes) >= 1) AND (scopes <@ ARRAY['write', 'read', 'memory:write', 'admin']))),
    ADD CONSTRAINT api_keys_agents_check CHECK (((agents IS NULL) OR (cardinality(agents) >= 1)));

-- The key API writes a tenant's keys in that tenant's transaction (row-level security admits only its rows);
-- what a key may do (scopes, agents) is fixed at its creation, so only its end and its last use change.
GRANT INSERT ON TABLE ingest.api_keys TO cairn_app;
GRANT UPDATE (revoked_at, expires_at, last_used_at) ON TABLE ingest.api_keys TO cairn_app;

-- Who did what to which tenant, from where: every admin and key action. Append-only for the services (INSERT
-- only, in the same transaction as the action); read by the operator through `ingest.audit_entries`, never by a
-- tenant's key (cairn_app cannot SELECT it).
CREATE TABLE ingest.audit_log (
    entry_id uuid DEFAULT gen_random_uuid() NOT NULL,
    at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    actor text NOT NULL,
    tenant_id uuid NOT NULL,
    action text NOT NULL,
    target text,
    client text,
    CONSTRAINT audit_log_pkey PRIMARY KEY (entry_id)
);
SELECT cairn.isolate_by_tenant('ingest.audit_log', force => false);
GRANT INSERT ON TABLE ingest.audit_log TO cairn_app;

CREATE INDEX audit_log_at ON ingest.audit_log USING btree (at);
CREATE INDEX audit_log_tenant_at ON ingest.audit_log USING btree (tenant_id, at);
