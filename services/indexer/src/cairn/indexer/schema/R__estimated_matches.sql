-- The planner's row estimate for a tenant-keyed query: how common a search's terms are, without running it.
-- Defined so by migration 0052_search_every_term_after_any.
--
-- The planner's estimate of the rows a keyed query matches (from the keys' statistics; one cheap EXPLAIN).
CREATE OR REPLACE FUNCTION indexer.estimated_matches(p_keyed tsquery) RETURNS float8
LANGUAGE plpgsql VOLATILE
SET search_path = indexer, pg_temp
AS $$
DECLARE
    plan json;
BEGIN
    EXECUTE format('EXPLAIN (FORMAT JSON) SELECT 1 FROM indexer.messages m WHERE indexer.tenant_terms(m.tenant_id, m.terms) @@ %L::tsquery', p_keyed)
        INTO plan;
    RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8;
END
$$;

REVOKE ALL ON FUNCTION indexer.estimated_matches(tsquery) FROM PUBLIC;
