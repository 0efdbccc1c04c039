CREATE OR REPLACE FUNCTION indexer.claim_embedding_model(p_model text, p_starting boolean, p_live interval)
RETURNS text
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = indexer, pg_temp AS $$
    INSERT INTO indexer.embedding_models AS m (model, started_at, seen_at) VALUES (p_model, now(), now())
    ON CONFLICT (model) DO UPDATE
        SET started_at = CASE WHEN p_starting THEN now() ELSE m.started_at END, seen_at = now();
    SELECT model FROM indexer.embedding_models WHERE seen_at > now() - p_live ORDER BY started_at DESC, model
    LIMIT 1;
$$;
REVOKE ALL ON FUNCTION indexer.claim_embedding_model(p_model text, p_starting boolean, p_live interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.claim_embedding_model(p_model text, p_starting boolean, p_live interval) TO cairn_app;
