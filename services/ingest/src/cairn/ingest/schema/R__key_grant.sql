-- What a key (by its hash) may do: its tenant, id, scopes and agents (NULL: every agent), and when it ends.
-- Like `ingest.authenticate`, one of the reads across tenants before a request's tenant is known, run as the
-- table owner; a revoked or expired key has no grant.
CREATE OR REPLACE FUNCTION ingest.key_grant(p_key_hash bytea)
RETURNS TABLE (tenant_id uuid, key_id uuid, scopes text[], agents text[], expires_at timestamp with time zone)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ingest, pg_temp AS $$
    SELECT k.tenant_id, k.key_id, k.scopes, k.agents, k.expires_at FROM ingest.api_keys k
    WHERE k.key_hash = p_key_hash AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())
$$;

REVOKE ALL ON FUNCTION ingest.key_grant(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ingest.key_grant(bytea) TO cairn_app;
