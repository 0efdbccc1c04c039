CREATE OR REPLACE FUNCTION indexer.stale_memory_agents(p_model text)
RETURNS TABLE (tenant_id uuid, agent_id text, stale bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = indexer, pg_temp AS $$
    SELECT c.tenant_id, c.agent_id, count(*) FROM indexer.memory_chunks c
    WHERE c.model < p_model OR c.model > p_model OR c.model IS NULL GROUP BY c.tenant_id, c.agent_id
    UNION ALL
    SELECT m.tenant_id, m.agent_id, count(*) FROM indexer.memory_turns m
    WHERE m.model < p_model OR m.model > p_model GROUP BY m.tenant_id, m.agent_id
$$;
REVOKE ALL ON FUNCTION indexer.stale_memory_agents(p_model text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.stale_memory_agents(p_model text) TO cairn_app;
