-- Which embedding model the memory index moves to during a rolling deploy: every indexer replica claims its model.
-- Defined so by migration 0077_embedding_model_claims.
--
-- From that migration's header:
-- A rolling deploy that changes the embedding model runs replicas of both models side by side, and each
-- re-embedded the other's vectors back to its own model until the old replicas were gone (0038 looks for
-- vectors of another model while running). Now every indexer replica claims its model when it starts and
-- again at each look; the model of the most recently started replica still alive is the one the index
-- moves to, and replicas of another model leave re-embedding to it. They keep indexing new text with their
-- own model meanwhile (the target's replicas re-embed it). When the newest replicas are gone (a rollback,
-- or their claims stop being renewed), the remaining model takes over. Cross-tenant operational state: no
-- tenant rows, read and written only through the function.
CREATE OR REPLACE FUNCTION indexer.claim_embedding_model(p_model text, p_starting boolean, p_live interval)
RETURNS text
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = indexer, pg_temp AS $$
    INSERT INTO indexer.embedding_models AS m (model, started_at, seen_at) VALUES (p_model, now(), now())
    ON CONFLICT (model) DO UPDATE
        SET started_at = CASE WHEN p_starting THEN now() ELSE m.started_at END, seen_at = now();
    SELECT model FROM indexer.embedding_models WHERE seen_at > now() - p_live ORDER BY started_at DESC, model
    LIMIT 1;
$$;

REVOKE ALL ON FUNCTION indexer.claim_embedding_model(text, boolean, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.claim_embedding_model(text, boolean, interval) TO cairn_app;
