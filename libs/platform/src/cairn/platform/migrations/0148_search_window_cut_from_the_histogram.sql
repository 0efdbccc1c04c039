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

CREATE OR REPLACE FUNCTION indexer.matching_messages(
    p_tenant uuid, p_query tsquery, p_agent text, p_session_keys text[], p_cap int,
    p_after_at timestamptz DEFAULT NULL, p_after_id uuid DEFAULT NULL, p_within tsquery DEFAULT NULL,
    p_share float8 DEFAULT 0
)
RETURNS TABLE (message_id uuid, occurred_at timestamptz, terms tsvector)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- EXPLAIN is refused in a STABLE function
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_custom_plan
SET max_parallel_workers_per_gather = 0  -- one tenant's few pages: starting workers costs more (below)
AS $$
#variable_conflict use_column
DECLARE
    keyed tsquery := indexer.tenant_terms_query(p_tenant, p_query);
    matches float8;
    size float8;
    before timestamptz := coalesce(p_after_at, 'infinity');
    after_id uuid := p_after_id;
    wanted int := p_cap;
    visits bigint;
    walked bigint := 0;
    hit record;
    last_at timestamptz;
    last_id uuid;
    window_rows bigint;
    cut_at timestamptz;
    cut_id uuid;
    held bigint;
    plan text;
    plan_line text;
    bounds timestamptz[];
    cut_position float8;
    oldest_at timestamptz;
    newest_at timestamptz;
    oldest_position float8;
    span_positions float8;
BEGIN
    IF p_tenant IS DISTINCT FROM cairn.current_tenant() OR p_cap <= 0 THEN
        RETURN;
    END IF;
    matches := indexer.estimated_matches(keyed);
    IF p_within IS NOT NULL AND p_share > 0 THEN
        matches := greatest(matches, p_share * indexer.estimated_matches(indexer.tenant_terms_query(p_tenant, p_within)));
    END IF;
    size := (SELECT coalesce(sum(n.messages), 0) FROM indexer.message_counts n WHERE n.tenant_id = p_tenant);
    -- never more matches than messages: a key missing from the index's statistics (a rare term, a small tenant's)
    -- gets a default share of the whole table, a thousand rows at 1M, and a tenant of 600 messages walked them all
    matches := least(matches, size);
    -- 0039: walking from the newest reads about size·cap/matches rows, the keys read every match.
    IF matches * matches > size * p_cap THEN
        visits := ceil(4 * size * p_cap / matches);
        -- row by row, to know the oldest it returns: the keys take over strictly after that row, so no row comes
        -- twice and none is skipped even if messages arrive or go between the two statements
        FOR hit IN
            SELECT v.message_id, v.occurred_at, v.terms
            FROM (
                SELECT m.message_id, m.occurred_at, m.terms, m.agent_id, m.session_key
                FROM indexer.messages m
                WHERE m.tenant_id = p_tenant AND m.occurred_at <= before
                  AND (after_id IS NULL OR m.occurred_at < before OR m.message_id > after_id)
                ORDER BY m.occurred_at DESC, m.message_id
                LIMIT visits
            ) v
            WHERE v.terms @@ p_query
              AND (p_agent IS NULL OR v.agent_id = p_agent) AND (p_session_keys IS NULL OR v.session_key = ANY(p_session_keys))
            ORDER BY v.occurred_at DESC, v.message_id
            LIMIT p_cap
        LOOP
            message_id := hit.message_id;
            occurred_at := hit.occurred_at;
            terms := hit.terms;
            RETURN NEXT;
            walked := walked + 1;
            last_at := hit.occurred_at;
            last_id := hit.message_id;
        END LOOP;
        IF walked >= p_cap THEN
            RETURN;
        END IF;
        -- every match among the rows the walk read was returned: the rest are older than the last one returned
        IF walked > 0 THEN
            before := last_at;
            after_id := last_id;
        END IF;
        wanted := p_cap - walked;
    ELSIF matches > 5 * p_cap THEN
        window_rows := ceil(1.2 * size * p_cap / matches);
        FOR window_number IN 1..2 LOOP
            -- the window ends at a time where the occurred_at histogram puts the share window_rows / size of the rows
            -- back from `before`, the tenant's rows taken as spread like the table's between its oldest and newest
            -- (linear inside a bucket, as the planner reads it), and holds every row at that time: cut_id is the
            -- greatest uuid, so the window takes all rows at cut_at and what follows starts strictly before it
            -- (message_id > cut_id is never true).
            -- Any contiguous range of the ranking order will do, its size only decides the work. Before a histogram
            -- (a small table, every time a most common value) the window ends at its exact last row, an index-only
            -- scan of window_rows recency entries (15-27k at 1M); so too for a tenant whose messages span less than
            -- one of the histogram's buckets. Reaching back past the tenant's oldest: the keys fetch the rest.
            IF bounds IS NULL THEN
                bounds := coalesce(indexer.occurred_at_histogram(), '{}');
                IF cardinality(bounds) >= 2 THEN
                    SELECT s.oldest, s.newest INTO oldest_at, newest_at FROM indexer.tenant_span(p_tenant) s;
                    oldest_position := indexer.histogram_position(bounds, oldest_at);
                    span_positions := indexer.histogram_position(bounds, newest_at) - oldest_position;
                END IF;
            END IF;
            IF cardinality(bounds) >= 2 AND span_positions >= 1 THEN
                cut_position := indexer.histogram_position(bounds, least(before, newest_at))
                                - span_positions * window_rows::float8 / greatest(size, 1);
                EXIT WHEN cut_position <= oldest_position;
                cut_at := least(indexer.histogram_at(bounds, cut_position), before);
                cut_id := 'ffffffff-ffff-ffff-ffff-ffffffffffff';
            ELSE
                SELECT m.occurred_at, m.message_id INTO cut_at, cut_id
                FROM indexer.messages m
                WHERE m.tenant_id = p_tenant AND m.occurred_at <= before
                  AND (after_id IS NULL OR m.occurred_at < before OR m.message_id > after_id)
                ORDER BY m.occurred_at DESC, m.message_id
                OFFSET window_rows - 1 LIMIT 1;
                EXIT WHEN NOT FOUND;
            END IF;
            -- the same scan as the statement below, with the same values: if it is the keys' bitmap alone, it reads
            -- every match's row, and the keys' statement does that once
            plan := '';
            FOR plan_line IN EXECUTE $window$EXPLAIN SELECT m.message_id FROM indexer.messages m
                WHERE m.tenant_id = $1 AND indexer.tenant_terms(m.tenant_id, m.terms) @@ $2
                  AND m.occurred_at >= $3 AND m.occurred_at <= $4
                  AND (m.occurred_at > $3 OR m.message_id <= $5)
                  AND ($6::uuid IS NULL OR m.occurred_at < $4 OR m.message_id > $6)
                  AND m.terms @@ $7
                  AND ($8::text IS NULL OR m.agent_id = $8) AND ($9::text[] IS NULL OR m.session_key = ANY($9))$window$
                USING p_tenant, keyed, cut_at, before, cut_id, after_id, p_query, p_agent, p_session_keys
            LOOP
                plan := plan || plan_line || E'\n';
            END LOOP;
            EXIT WHEN position('on messages_tenant_terms' IN plan) > 0 AND position('BitmapAnd' IN plan) = 0;
            -- the subquery takes no order, so the planner ANDs the keys with the recency index's range rather than
            -- walking that range in order
            RETURN QUERY
            SELECT w.message_id, w.occurred_at, w.terms
            FROM (
                SELECT m.message_id, m.occurred_at, m.terms
                FROM indexer.messages m
                WHERE m.tenant_id = p_tenant AND indexer.tenant_terms(m.tenant_id, m.terms) @@ keyed
                  AND m.occurred_at >= cut_at AND m.occurred_at <= before
                  AND (m.occurred_at > cut_at OR m.message_id <= cut_id)
                  AND (after_id IS NULL OR m.occurred_at < before OR m.message_id > after_id)
                  AND m.terms @@ p_query
                  AND (p_agent IS NULL OR m.agent_id = p_agent) AND (p_session_keys IS NULL OR m.session_key = ANY(p_session_keys))
                OFFSET 0
            ) w
            ORDER BY w.occurred_at DESC, w.message_id
            LIMIT wanted;
            GET DIAGNOSTICS held = ROW_COUNT;
            IF held >= wanted THEN
                RETURN;
            END IF;
            -- every match in the window was returned: the rest come after its last row (with a histogram's cut: are
            -- older than cut_at)
            wanted := wanted - held;
            before := cut_at;
            after_id := cut_id;
            -- an estimate too high leaves the window short: once more, sized by the matches it held; a window
            -- that held hardly any says little, and the keys fetch the rest
            window_rows := ceil(1.2 * wanted * window_rows / greatest(held, 1));
            EXIT WHEN window_rows > 2 * ceil(1.2 * size * p_cap / matches);
        END LOOP;
    END IF;
    RETURN QUERY
    SELECT m.message_id, m.occurred_at, m.terms
    FROM indexer.messages m
    WHERE (m.tenant_id = p_tenant) IS TRUE AND indexer.tenant_terms(m.tenant_id, m.terms) @@ keyed
      AND m.occurred_at <= before AND (after_id IS NULL OR m.occurred_at < before OR m.message_id > after_id)
      AND m.terms @@ p_query
      AND (p_agent IS NULL OR m.agent_id = p_agent) AND (p_session_keys IS NULL OR m.session_key = ANY(p_session_keys))
    ORDER BY m.occurred_at DESC, m.message_id
    LIMIT wanted;
END
$$;
