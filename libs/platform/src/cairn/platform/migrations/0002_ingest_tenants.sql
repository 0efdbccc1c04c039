-- ingest owns tenants and their API keys. Keys are stored as SHA-256 hashes, never in clear.
CREATE SCHEMA IF NOT EXISTS ingest;

CREATE TABLE ingest.tenants (
    tenant_id  uuid        PRIMARY KEY,
    name       text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ingest.api_keys (
    key_hash   bytea       PRIMARY KEY,
    tenant_id  uuid        NOT NULL REFERENCES ingest.tenants (tenant_id),
    key_prefix text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
CREATE INDEX api_keys_tenant ON ingest.api_keys (tenant_id);

-- Not forced: the owner-run functions below must see every tenant's keys; cairn_app is not the owner,
-- so the policy still binds every service.
SELECT cairn.isolate_by_tenant('ingest.tenants', force => false);
SELECT cairn.isolate_by_tenant('ingest.api_keys', force => false);

-- Before a request's tenant is known the key itself must be looked up: these two functions are the
-- only way across tenants, and they run as the table owner.
CREATE FUNCTION ingest.authenticate(p_key_hash bytea) RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ingest, pg_temp AS $$
    SELECT tenant_id FROM ingest.api_keys WHERE key_hash = p_key_hash AND revoked_at IS NULL
$$;

CREATE FUNCTION ingest.create_tenant(p_tenant_id uuid, p_name text, p_key_hash bytea, p_key_prefix text)
RETURNS uuid
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ingest, pg_temp AS $$
BEGIN
    INSERT INTO ingest.tenants (tenant_id, name) VALUES (p_tenant_id, p_name);
    INSERT INTO ingest.api_keys (key_hash, tenant_id, key_prefix) VALUES (p_key_hash, p_tenant_id, p_key_prefix);
    RETURN p_tenant_id;
END
$$;

GRANT USAGE ON SCHEMA ingest TO cairn_app;
GRANT SELECT ON ingest.tenants, ingest.api_keys TO cairn_app;
REVOKE ALL ON FUNCTION ingest.authenticate(bytea) FROM PUBLIC;
REVOKE ALL ON FUNCTION ingest.create_tenant(uuid, text, bytea, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ingest.authenticate(bytea) TO cairn_app;
GRANT EXECUTE ON FUNCTION ingest.create_tenant(uuid, text, bytea, text) TO cairn_app;
