-- A tenant's oldest and newest message time.
-- Defined so by migration 0148_search_window_cut_from_the_histogram.
--
-- the tenant's oldest and newest message (two probes of the recency index), planned once per session
CREATE OR REPLACE FUNCTION indexer.tenant_span(p_tenant uuid, OUT oldest timestamptz, OUT newest timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    oldest := (SELECT m.occurred_at FROM indexer.messages m WHERE m.tenant_id = p_tenant ORDER BY m.occurred_at LIMIT 1);
    newest := (SELECT m.occurred_at FROM indexer.messages m WHERE m.tenant_id = p_tenant ORDER BY m.occurred_at DESC LIMIT 1);
END
$$;

REVOKE ALL ON FUNCTION indexer.tenant_span(uuid) FROM PUBLIC;
