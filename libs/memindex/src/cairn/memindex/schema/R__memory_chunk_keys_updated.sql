CREATE OR REPLACE FUNCTION indexer.memory_chunk_keys_updated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = indexer, pg_temp
AS $$
BEGIN
    DELETE FROM indexer.memory_chunk_keys k WHERE k.tenant_id = OLD.tenant_id AND k.chunk_id = OLD.chunk_id;
    INSERT INTO indexer.memory_chunk_keys
    VALUES (NEW.tenant_id, NEW.chunk_id, NEW.agent_id, NEW.source, NEW.session_key, NEW.occurred_at, strip(NEW.terms));
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION indexer.memory_chunk_keys_updated() FROM PUBLIC;
CREATE OR REPLACE TRIGGER memory_chunk_keys_updated AFTER UPDATE OF tenant_id, chunk_id, agent_id, source, session_key, occurred_at, terms ON indexer.memory_chunks FOR EACH ROW EXECUTE FUNCTION indexer.memory_chunk_keys_updated();
