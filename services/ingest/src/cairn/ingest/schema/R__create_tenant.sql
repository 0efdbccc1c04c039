-- A tenant with its first API key, in one call (the admin API's), as the table owner.
-- Defined so by migration 0002_ingest_tenants.
--
-- From that migration's header:
-- ingest owns tenants and their API keys. Keys are stored as SHA-256 hashes, never in clear.
CREATE OR REPLACE FUNCTION ingest.create_tenant(p_tenant_id uuid, p_name text, p_key_hash bytea, p_key_prefix text)
RETURNS uuid
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ingest, pg_temp AS $$
BEGIN
    INSERT INTO ingest.tenants (tenant_id, name) VALUES (p_tenant_id, p_name);
    INSERT INTO ingest.api_keys (key_hash, tenant_id, key_prefix) VALUES (p_key_hash, p_tenant_id, p_key_prefix);
    RETURN p_tenant_id;
END
$$;

REVOKE ALL ON FUNCTION ingest.create_tenant(uuid, text, bytea, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ingest.create_tenant(uuid, text, bytea, text) TO cairn_app;
