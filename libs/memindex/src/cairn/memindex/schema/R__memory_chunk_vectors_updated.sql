-- memory_chunk_vectors follows memory_chunks: the narrow rows (vectors in line) a small agent's exact scan reads.
-- Defined so by V0002__exact_scan_vectors (which says why).
-- A re-embedding (a new model's vector) is an update of model and embedding: the row follows it.
CREATE OR REPLACE FUNCTION indexer.memory_chunk_vectors_updated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = indexer, pg_temp
AS $$
BEGIN
    DELETE FROM indexer.memory_chunk_vectors v WHERE v.tenant_id = OLD.tenant_id AND v.chunk_id = OLD.chunk_id;
    IF NEW.embedding IS NOT NULL THEN
        INSERT INTO indexer.memory_chunk_vectors
        VALUES (NEW.tenant_id, NEW.chunk_id, NEW.agent_id, NEW.source, NEW.session_key, NEW.path, NEW.model, NEW.embedding);
    END IF;
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION indexer.memory_chunk_vectors_updated() FROM PUBLIC;
CREATE OR REPLACE TRIGGER memory_chunk_vectors_updated
    AFTER UPDATE OF tenant_id, chunk_id, agent_id, source, session_key, path, model, embedding ON indexer.memory_chunks
    FOR EACH ROW
    EXECUTE FUNCTION indexer.memory_chunk_vectors_updated();
