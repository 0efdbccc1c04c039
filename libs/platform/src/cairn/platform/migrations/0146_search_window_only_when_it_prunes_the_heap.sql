-- Session search (issue 4, the 1M tail): a window (0093) runs only if its plan leaves the rows outside it before the
-- heap is read, the keys' bitmap ANDed with the recency index's range. When the keys are estimated to match few
-- rows (an AND of words that occur together, which the planner takes as independent: 35 estimated for 3,388 in the
-- largest tenant at 1M), the plan is the keys' bitmap alone with the window as a filter: it reads every match's
-- heap row, as the keys' statement does, and a second window reads them all again (Alice 发布会: 3,054 heap blocks
-- per window, 85 % of them outside it). So the window's scan is EXPLAINed once its cut is known (a custom plan with
-- the same values, ~0.3 ms); if it is the keys' bitmap without a BitmapAnd, the keys fetch the rest in one
-- statement from the same start, so the rows returned are the same.
--
-- Largest tenant at 1M (129k messages), in process, copies of the functions, interleaved, 8 rounds of the 50
-- slowest queries of session 15-16's bench runs, load 2.5-2.7: per-query-median p99 52.7 -> 44.6 ms, median ratio
-- 0.959 (an identical copy: 0.987 at load 2.7-3.5), results identical 50/50; 'Alice 发布会' 51.5 -> 40.8,
-- '发布会 Alice' 46.6 -> 31.7, 'release 发布会' 48.9 -> 36.5. The bench's own 200 queries of seeds 7 and 23 (400,
-- few of them such pairs): median ratio 0.993, control 0.994.

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
            -- the window ends at its last row in the ranking order; none that far back: the keys fetch the rest
            SELECT m.occurred_at, m.message_id INTO cut_at, cut_id
            FROM indexer.messages m
            WHERE m.tenant_id = p_tenant AND m.occurred_at <= before
              AND (after_id IS NULL OR m.occurred_at < before OR m.message_id > after_id)
            ORDER BY m.occurred_at DESC, m.message_id
            OFFSET window_rows - 1 LIMIT 1;
            EXIT WHEN NOT FOUND;
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
            -- every match in the window was returned: the rest are older than its last row
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
