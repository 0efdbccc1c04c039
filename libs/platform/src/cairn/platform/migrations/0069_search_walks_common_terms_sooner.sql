-- Session search in the largest tenant at 1M messages (issue 4): a common term is walked to from the newest
-- messages sooner.
--
-- matching_messages (0039, 0054) walks the tenant's newest messages when that reads fewer rows than the keys
-- would fetch (matches² > size·cap), as if a row cost the same either way. It does not: a walk reads the
-- tenant's recency index in order and its rows as they come, the keys fetch every match through a bitmap and
-- sort them all for the newest `cap`. Measured at 1M stored messages in the largest tenant (123,589 messages;
-- notes/search9.md): a term in ~9-10k of its messages ('bob', '王芳') took 150-220 ms through the keys and
-- 50-70 ms walked (~12k rows); a term in ~4.7k ('main_test.py') was faster through the keys than walked
-- (~26k rows). So a row through the keys counts as four walked rows: walked when 4·matches² > size·cap
-- (the largest tenant: from ~5,500 matches instead of ~11,000), if there are more matches than wanted: with
-- fewer the walk would read the whole tenant and hand over to the keys for nothing (the even weighing never
-- walks then). The answer is the same either way (the newest `cap` matches, 0039's tests); a walk that finds
-- too few still hands over to the keys (0054).
--
-- Only for the planner's own estimate: the every-term search past the any-term window (0052) estimates from a
-- share among recent candidates, a hint that can be far off, and a walk that finds too few costs the walk and
-- the keys; it keeps the even weighing.

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
    -- 0039: walking from the newest reads about size·cap/matches rows, the keys read every match; a row read
    -- through the keys costs about four of a walk's (0069), when the estimate is the planner's own and the walk
    -- can stop before the oldest message (more matches than wanted; else it reads all, then the keys again)
    IF (CASE WHEN p_within IS NULL AND matches > p_cap THEN 4 ELSE 1 END) * matches * matches > size * p_cap THEN
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
