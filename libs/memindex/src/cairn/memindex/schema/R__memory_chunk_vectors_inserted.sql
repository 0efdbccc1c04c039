-- memory_chunk_vectors follows memory_chunks: the narrow rows (vectors in line) a small agent's exact scan reads.
-- Defined so by V0002__exact_scan_vectors (which says why).
CREATE OR REPLACE FUNCTION indexer.memory_chunk_vectors_inserted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = indexer, pg_temp
AS $$
BEGIN
    INSERT INTO indexer.memory_chunk_vectors
    SELECT n.tenant_id, n.chunk_id, n.agent_id, n.source, n.session_key, n.path, n.model, n.embedding FROM added n
    WHERE n.embedding IS NOT NULL;
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION indexer.memory_chunk_vectors_inserted() FROM PUBLIC;
CREATE OR REPLACE TRIGGER memory_chunk_vectors_inserted AFTER INSERT ON indexer.memory_chunks
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT
    EXECUTE FUNCTION indexer.memory_chunk_vectors_inserted();
