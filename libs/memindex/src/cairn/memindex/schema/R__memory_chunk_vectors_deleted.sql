-- memory_chunk_vectors follows memory_chunks: the narrow rows (vectors in line) a small agent's exact scan reads.
-- Defined so by V0002__exact_scan_vectors (which says why).
CREATE OR REPLACE FUNCTION indexer.memory_chunk_vectors_deleted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = indexer, pg_temp
AS $$
BEGIN
    DELETE FROM indexer.memory_chunk_vectors v USING removed o WHERE v.tenant_id = o.tenant_id AND v.chunk_id = o.chunk_id;
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION indexer.memory_chunk_vectors_deleted() FROM PUBLIC;
CREATE OR REPLACE TRIGGER memory_chunk_vectors_deleted AFTER DELETE ON indexer.memory_chunks
    REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT
    EXECUTE FUNCTION indexer.memory_chunk_vectors_deleted();
