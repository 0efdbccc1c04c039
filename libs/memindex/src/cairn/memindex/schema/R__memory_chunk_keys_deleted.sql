CREATE OR REPLACE FUNCTION indexer.memory_chunk_keys_deleted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = indexer, pg_temp
AS $$
BEGIN
    DELETE FROM indexer.memory_chunk_keys k USING removed o WHERE k.tenant_id = o.tenant_id AND k.chunk_id = o.chunk_id;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION indexer.memory_chunk_keys_deleted() FROM PUBLIC;
CREATE OR REPLACE TRIGGER memory_chunk_keys_deleted AFTER DELETE ON indexer.memory_chunks REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION indexer.memory_chunk_keys_deleted();
