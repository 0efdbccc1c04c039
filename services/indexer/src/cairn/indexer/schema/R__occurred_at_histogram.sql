-- The planner's histogram of indexer.messages.occurred_at, for cutting search windows by time.
-- Defined so by migration 0148_search_window_cut_from_the_histogram.
--
-- the planner's histogram of indexer.messages.occurred_at (NULL without statistics). Its own function for its plan
-- mode: under matching_messages's force_custom_plan the pg_stats view was planned on every call (0.8-1.0 ms); here
-- its plan is kept for the session (0.2 ms). Called by matching_messages as its owner; pg_stats shows a table with
-- row security only to a role it does not apply to.
CREATE OR REPLACE FUNCTION indexer.occurred_at_histogram() RETURNS timestamptz[]
LANGUAGE plpgsql STABLE
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN (SELECT s.histogram_bounds::text::timestamptz[] FROM pg_stats s
            WHERE s.schemaname = 'indexer' AND s.tablename = 'messages' AND s.attname = 'occurred_at');
END
$$;

REVOKE ALL ON FUNCTION indexer.occurred_at_histogram() FROM PUBLIC;
