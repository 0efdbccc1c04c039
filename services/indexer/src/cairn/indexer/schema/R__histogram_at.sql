-- The time at a fraction of a histogram's span (occurred_at_histogram): where a search window is cut.
-- Defined so by migration 0148_search_window_cut_from_the_histogram.
--
-- From that migration's header:
-- Session search (issue 4, the 1M tail): a window (0093, 0146) ends at a time read from the occurred_at histogram
-- rather than at its exact last row. The exact cut was an index-only scan of window_rows recency entries
-- (OFFSET window_rows - 1 LIMIT 1: 18-26k entries, 5-7 ms per window for the largest tenant at 1M, each of the two
-- windows) before the window's statement, which scans the same range again for its BitmapAnd. A window only has to be
-- a contiguous range of the ranking order (occurred_at DESC, message_id) with the next step starting strictly after
-- it: `occurred_at >= cut_at` with every row at cut_at in the window (cut_id the greatest uuid), and then
-- before := cut_at with after_id := that uuid, i.e. only rows older than cut_at. The rows returned are the same.
-- The histogram is read through indexer.occurred_at_histogram() with force_generic_plan (search27: pg_stats planned
-- on every call under force_custom_plan costs 0.8-1.0 ms, through the function 0.2 ms); the 0146 plan check runs
-- with the histogram's cut. The tenant's rows are taken as spread like the table's between its oldest and newest
-- message (indexer.tenant_span, two index probes); a table without a histogram, or a tenant spanning less than one of
-- its buckets, keeps the exact cut.
--
-- Largest tenant at 1M (129,920 messages), in process, copies of the functions, interleaved, an identical copy as
-- control, load 0.9-1.3: the every-term call alone, 14 two-word queries x 30, sum of medians 328.1 -> 270.9 ms,
-- median ratio 0.789 (control 1.000; 'release ERR_CONN_RESET' 28.5 -> 22.3 ms, 'Alice 上海' 26.4 -> 20.2); the whole
-- search over the 50 slowest queries x 12: median ratio 0.950 (control 0.997), per-query-median p99 54.6 -> 49.6 ms
-- (control 56.3); the bench's 400 queries (seeds 7, 23) x 3: 0.993 (control 0.999). Identical results everywhere.
CREATE OR REPLACE FUNCTION indexer.histogram_at(p_bounds timestamptz[], p_position float8) RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    n int := cardinality(p_bounds);
    k int;
BEGIN
    IF p_position <= 0 THEN RETURN p_bounds[1]; END IF;
    IF p_position >= n - 1 THEN RETURN p_bounds[n]; END IF;
    k := floor(p_position)::int + 1;
    IF NOT (isfinite(p_bounds[k]) AND isfinite(p_bounds[k + 1])) THEN
        RETURN p_bounds[k];
    END IF;
    RETURN p_bounds[k] + (p_bounds[k + 1] - p_bounds[k]) * (p_position - (k - 1));
END
$$;
