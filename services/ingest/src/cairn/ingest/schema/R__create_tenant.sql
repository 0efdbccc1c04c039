CREATE OR REPLACE FUNCTION ingest.create_tenant(p_tenant_id uuid, p_name text, p_key_hash bytea, p_key_prefix text)
RETURNS uuid
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ingest, pg_temp AS $$
BEGIN
    INSERT INTO ingest.tenants (tenant_id, name) VALUES (p_tenant_id, p_name);
    INSERT INTO ingest.api_keys (key_hash, tenant_id, key_prefix) VALUES (p_key_hash, p_tenant_id, p_key_prefix);
    RETURN p_tenant_id;
END
$$;
REVOKE ALL ON FUNCTION ingest.create_tenant(p_tenant_id uuid, p_name text, p_key_hash bytea, p_key_prefix text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ingest.create_tenant(p_tenant_id uuid, p_name text, p_key_hash bytea, p_key_prefix text) TO cairn_app;
