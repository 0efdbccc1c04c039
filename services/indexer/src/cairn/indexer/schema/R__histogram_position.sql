-- Where a time falls in a histogram, as a fraction of its buckets: how many of a tenant's rows lie past it.
-- Defined so by migration 0148_search_window_cut_from_the_histogram.
--
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
CREATE OR REPLACE FUNCTION indexer.histogram_position(p_bounds timestamptz[], p_at timestamptz) RETURNS float8
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    lo int := 1;
    hi int := cardinality(p_bounds);
    mid int;
BEGIN
    IF p_at <= p_bounds[1] THEN RETURN 0; END IF;
    IF p_at >= p_bounds[hi] THEN RETURN hi - 1; END IF;
    WHILE hi - lo > 1 LOOP  -- p_bounds[lo] < p_at < p_bounds[hi]
        mid := (lo + hi) / 2;
        IF p_bounds[mid] <= p_at THEN lo := mid; ELSE hi := mid; END IF;
    END LOOP;
    IF NOT (isfinite(p_bounds[lo]) AND isfinite(p_bounds[hi])) THEN
        RETURN lo - 1;
    END IF;
    RETURN lo - 1 + extract(epoch FROM p_at - p_bounds[lo]) / greatest(extract(epoch FROM p_bounds[hi] - p_bounds[lo]), 1e-6);
END
$$;
