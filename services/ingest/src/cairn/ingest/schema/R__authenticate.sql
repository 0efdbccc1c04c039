-- The tenant of an API key (by its hash): the one read across tenants before a request's tenant is known.
-- Defined so by migration 0002_ingest_tenants.
--
-- Before a request's tenant is known the key itself must be looked up: these two functions are the
-- only way across tenants, and they run as the table owner.
CREATE OR REPLACE FUNCTION ingest.authenticate(p_key_hash bytea) RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ingest, pg_temp AS $$
    SELECT tenant_id FROM ingest.api_keys WHERE key_hash = p_key_hash AND revoked_at IS NULL
      AND (expires_at IS NULL OR expires_at > now())
$$;

REVOKE ALL ON FUNCTION ingest.authenticate(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ingest.authenticate(bytea) TO cairn_app;
