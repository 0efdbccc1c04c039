-- Agents with chunks or turns of another embedding model than the given one: the re-embedding's work list.
-- Defined so by migration 0064_stale_memory_turns_in_one_query.
--
-- From that migration's header:
-- The memory worker looks for vectors of another model every `reembed_check_s` (0038): chunks in one query,
-- but turns tenant by tenant, one probe per tenant (~250 ms of database CPU per look at 1,000 tenants,
-- growing with the tenant count, whether or not anything is stale). Turns are now read in one query over a
-- (model) index, as chunks are, by the owner, for whom indexer.memory_turns is no longer forced (as 0042 did
-- for memory_pending). cairn_app and cairn_projector still see the table only through its policies.
CREATE OR REPLACE FUNCTION indexer.stale_memory_agents(p_model text)
RETURNS TABLE (tenant_id uuid, agent_id text, stale bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = indexer, pg_temp AS $$
    SELECT c.tenant_id, c.agent_id, count(*) FROM indexer.memory_chunks c
    WHERE c.model < p_model OR c.model > p_model OR c.model IS NULL GROUP BY c.tenant_id, c.agent_id
    UNION ALL
    SELECT m.tenant_id, m.agent_id, count(*) FROM indexer.memory_turns m
    WHERE m.model < p_model OR m.model > p_model GROUP BY m.tenant_id, m.agent_id
$$;

REVOKE ALL ON FUNCTION indexer.stale_memory_agents(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.stale_memory_agents(text) TO cairn_app;
