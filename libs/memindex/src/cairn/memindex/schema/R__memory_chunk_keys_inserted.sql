CREATE OR REPLACE FUNCTION indexer.memory_chunk_keys_inserted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = indexer, pg_temp
AS $$
BEGIN
    INSERT INTO indexer.memory_chunk_keys
    SELECT n.tenant_id, n.chunk_id, n.agent_id, n.source, n.session_key, n.occurred_at, strip(n.terms) FROM added n;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION indexer.memory_chunk_keys_inserted() FROM PUBLIC;
CREATE OR REPLACE TRIGGER memory_chunk_keys_inserted AFTER INSERT ON indexer.memory_chunks REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION indexer.memory_chunk_keys_inserted();
