-- Session search's matching: the most recent `cap` messages of a tenant matching a query, by the tenant-keyed GIN,
-- a walk back in time, or windows of recency, whichever reads least.
-- Defined so by migration 0151_search_matches_estimated_from_the_any_term_candidates.
--
-- Session search (issue 4, the 1M tail): the every-term call estimates its matches from what the any-term call saw
-- rather than from the planner. search_messages passes the oldest any-term candidate (p_after_at) and the share of the
-- candidates with every term (p_share = every / found, p_cap = found - every): the `every` matches it saw are all
-- the every-term rows newer than p_after_at, so every · size / (the tenant's rows from p_after_at on) estimates the
-- tenant's matches. Before, p_share · the planner's estimate of the any-term query, which counts a word's exact form
-- and its stem (and an identifier and its parts) as independent rows: 1.3-2.1× the real count for most two-word
-- queries of the largest tenant at 1M ('release ERR_CONN_RESET' 4,781 for 2,896; the observed density: 2,803). The
-- window (0093) then held ~70 % of what was wanted and a second one ran, each with its own scan of the keys (GIN,
-- 3-5 ms) and of the recency range; with the estimate near the real count, a query whose matches are under 5 × cap
-- takes the keys' one statement (one GIN scan, its ~3k heap rows in memory, ~1.2 µs each) and a larger one a first
-- window that holds what is wanted. Only where the old estimate takes a window, and the rows from p_after_at on are
-- counted (index-only, ~1 ms for 3,400) only where that estimate puts them under 3,000: counting 5-20k of them cost
-- sparse queries 2-6 ms ('quarterly review' 11.6 -> 15.9 ms with a cap of 5,000 and no such guard). Only the choice
-- of path and the window's size change: the rows returned are the same.
--
-- Largest tenant at 1M (129,920 messages), in process, copies of the functions, interleaved, an identical copy as
-- control, results identical in every run. The every-term call alone (search30-mm.py, params as search_messages
-- derives them), 27 two-word queries x 25, load 3.6: sum of medians 523.2 -> 452.5 ms, median ratio 0.902 (control
-- 1.029); 'release ERR_CONN_RESET' 30.3 -> 23.9 ms, 'Alice 张伟' 36.1 -> 24.3 (an earlier version, load 2.0: 16.3 ->
-- 12.5 ms); 9 sparse queries x 40: 1.009 (control 0.998). The whole search, the 15 queries whose windows change x 24,
-- load 3.2: median ratio 0.906 (control 0.955), per-query-median p99 63.0 -> 55.0 ms (control 56.5); the 50 slowest
-- x 12 at load 3.1 are noise-bound: 1.038 (control 0.986; per query the control differs by up to 40 %); an earlier
-- version at load 2.3: 0.985 (control 0.988), 'release ERR_CONN_RESET' 45.5 -> 38.5 ms. The bench's 400 queries
-- (seeds 7, 23) x 3, load 3.5: 1.000 (control 0.995).
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
    keyed_matches float8;
    within_matches float8;
    seen float8;
    newer bigint;
BEGIN
    IF p_tenant IS DISTINCT FROM cairn.current_tenant() OR p_cap <= 0 THEN
        RETURN;
    END IF;
    matches := indexer.estimated_matches(keyed);
    size := (SELECT coalesce(sum(n.messages), 0) FROM indexer.message_counts n WHERE n.tenant_id = p_tenant);
    IF p_within IS NOT NULL AND p_share > 0 THEN
        keyed_matches := matches;
        within_matches := indexer.estimated_matches(indexer.tenant_terms_query(p_tenant, p_within));
        matches := greatest(matches, p_share * within_matches);
        -- where that takes a window (below): the every-term rows the any-term call saw (p_share = seen / found,
        -- p_cap = found - seen) are all of those from p_after_at on, and their density there over the tenant is the
        -- estimate (0151). The planner's estimate of the any-term query counts a word's two forms as independent
        -- rows (1.3-2.1× at 1M) and sized windows too small. The rows from p_after_at on are counted only where that
        -- estimate puts them under 3,000 (at most 2× off) and up to 6,000: counting more costs more than it gains.
        IF matches > 5 * p_cap AND least(matches, size) ^ 2 <= size * p_cap
           AND p_after_at IS NOT NULL AND p_share < 1 AND p_share * p_cap / (1 - p_share) >= 10 THEN
            seen := p_share * p_cap / (1 - p_share);
            IF (p_cap + seen) * size / greatest(within_matches, 1) < 3000 THEN
                newer := (SELECT count(*) FROM (
                              SELECT 1 FROM indexer.messages m
                              WHERE m.tenant_id = p_tenant AND m.occurred_at >= p_after_at LIMIT 6000
                          ) n);
                IF newer > 0 AND newer < 6000 THEN
                    matches := greatest(keyed_matches, seen * size / newer);
                END IF;
            END IF;
        END IF;
    END IF;
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

REVOKE ALL ON FUNCTION indexer.matching_messages(uuid, tsquery, text, text[], int, timestamptz, uuid, tsquery, float8)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.matching_messages(uuid, tsquery, text, text[], int, timestamptz, uuid, tsquery, float8)
    TO cairn_app;
