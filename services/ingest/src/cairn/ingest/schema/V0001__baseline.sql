-- Ingest's schema: tenants, their API keys and per-agent configuration.
-- The squash of migrations 0001-0151 (see tests/integration/schema/): today's schema in one file.

CREATE SCHEMA ingest;
GRANT USAGE ON SCHEMA ingest TO cairn_app;

-- Each agent's configuration, owned by ingest (it routes by it), and the part of it the session service
-- needs, projected from `agent.configured` into the session service's own table.
CREATE TABLE ingest.agent_configs (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    config jsonb NOT NULL,
    version integer NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT agent_configs_version_check CHECK ((version >= 1)),
    CONSTRAINT agent_configs_pkey PRIMARY KEY (tenant_id, agent_id)
);
SELECT cairn.isolate_by_tenant('ingest.agent_configs');

CREATE TABLE ingest.api_keys (
    key_hash bytea NOT NULL,
    tenant_id uuid NOT NULL,
    key_prefix text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    CONSTRAINT api_keys_pkey PRIMARY KEY (key_hash)
);
SELECT cairn.isolate_by_tenant('ingest.api_keys', force => false);

CREATE TABLE ingest.tenants (
    tenant_id uuid NOT NULL,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tenants_name_check CHECK (((length(name) >= 1) AND (length(name) <= 200))),
    CONSTRAINT tenants_pkey PRIMARY KEY (tenant_id)
);
SELECT cairn.isolate_by_tenant('ingest.tenants', force => false);

GRANT SELECT,INSERT,UPDATE ON TABLE ingest.agent_configs TO cairn_app;
GRANT SELECT ON TABLE ingest.api_keys TO cairn_app;
GRANT SELECT ON TABLE ingest.tenants TO cairn_app;

CREATE INDEX api_keys_tenant ON ingest.api_keys USING btree (tenant_id);

ALTER TABLE ingest.api_keys
    ADD CONSTRAINT api_keys_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES ingest.tenants(tenant_id);
