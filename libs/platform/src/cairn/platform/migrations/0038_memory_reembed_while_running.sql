-- Re-embedding after a model change (issue 5) is looked for while the indexer runs, not only at its start,
-- so the look must be cheap when nothing is stale. Chunks: indexer.memory_chunks is not forced for its
-- owner (0031), so one query over the (model) index finds every agent with chunks of another model or
-- none (`model <> p` cannot use a btree; `< p OR > p` can). Turns (their own vectors, 0024) stay forced,
-- so they are looked for tenant by tenant, each one probe of (tenant_id, model); a turn without a model
-- is not chunked yet and gets its vector then.
CREATE INDEX memory_turns_model ON indexer.memory_turns (tenant_id, model) WHERE model IS NOT NULL;

CREATE OR REPLACE FUNCTION indexer.stale_memory_agents(p_model text)
RETURNS TABLE (tenant_id uuid, agent_id text, stale bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = indexer, pg_temp AS $$
DECLARE
    t uuid;
BEGIN
    RETURN QUERY SELECT c.tenant_id, c.agent_id, count(*) FROM indexer.memory_chunks c
        WHERE c.model < p_model OR c.model > p_model OR c.model IS NULL GROUP BY c.tenant_id, c.agent_id;
    FOR t IN SELECT x.tenant_id FROM ingest.tenants x LOOP
        PERFORM set_config('cairn.tenant_id', t::text, true);
        RETURN QUERY SELECT m.tenant_id, m.agent_id, count(*) FROM indexer.memory_turns m
            WHERE m.tenant_id = t AND (m.model < p_model OR m.model > p_model) GROUP BY m.tenant_id, m.agent_id;
    END LOOP;
    PERFORM set_config('cairn.tenant_id', '', true);
END
$$;
