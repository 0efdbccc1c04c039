-- Session search in the largest tenant at 1M messages (issue 4): the every-term candidates are looked for only
-- where the any-term candidates have not already looked.
--
-- A search ranks the most recent `cap` messages matching any term, plus the most recent `cap` matching every
-- term (0029). Both were found from scratch, so the second search re-read most of what the first had read:
-- every message with every term also has some term, and the most recent `cap` any-term matches already hold
-- each every-term match down to the oldest of them. In the largest tenant the second search was most of
-- a slow search's time: the two bigrams of a Chinese word (发布会 → 发布, 布会) almost always come together, so
-- the planner (multiplying their selectivities) expected ~100 rows with both and the keys fetched ~36,000, all
-- to find the same rows the first search had just found.
--
-- Now the any-term search runs first (over any | every, so that every-term matches are any-term matches by
-- construction, whatever the caller passes; for the tokenizer's queries it matches the same rows). If it found
-- fewer than `cap`, it found every match of both and the second search is skipped. Otherwise the second search
-- looks only at messages older than the oldest any-term candidate (in the ranking order: occurred_at
-- descending, then message id) for the `cap` minus those it already holds. The candidates are the same set as
-- before — the same scores, the same hits — and they are now disjoint, so no DISTINCT sort either.
--
-- Choosing walk or keys for the second search: the share of every-term matches among the any-term candidates
-- is known by then, so the every-term matches are estimated as at least that share of the any-term query's
-- estimate (the planner's own estimate of an AND of correlated terms is far too low), against the number
-- still wanted.

DROP FUNCTION indexer.matching_messages(uuid, tsquery, text, text[], int);
-- The most recent p_cap messages matching p_query, after (p_after_at, p_after_id) in the ranking order when
-- given. p_within/p_share: a hint that p_query matches at least p_share of what p_within matches.
CREATE FUNCTION indexer.matching_messages(
    p_tenant uuid, p_query tsquery, p_agent text, p_session_keys text[], p_cap int,
    p_after_at timestamptz DEFAULT NULL, p_after_id uuid DEFAULT NULL, p_within tsquery DEFAULT NULL,
    p_share float8 DEFAULT 0
)
RETURNS TABLE (message_id uuid, occurred_at timestamptz, terms tsvector)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- EXPLAIN is refused in a STABLE function
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
#variable_conflict use_column
DECLARE
    keyed tsquery := indexer.tenant_terms_query(p_tenant, p_query);
    matches float8;
    size float8;
    before timestamptz := coalesce(p_after_at, 'infinity');
BEGIN
    IF p_tenant IS DISTINCT FROM cairn.current_tenant() OR p_cap <= 0 THEN
        RETURN;
    END IF;
    matches := indexer.estimated_matches(keyed);
    IF p_within IS NOT NULL AND p_share > 0 THEN
        matches := greatest(matches, p_share * indexer.estimated_matches(indexer.tenant_terms_query(p_tenant, p_within)));
    END IF;
    size := (SELECT coalesce(sum(n.messages), 0) FROM indexer.message_counts n WHERE n.tenant_id = p_tenant);
    -- 0039: walking from the newest reads about size·cap/matches rows, the keys read every match.
    IF matches * matches > size * p_cap THEN
        RETURN QUERY
        SELECT m.message_id, m.occurred_at, m.terms
        FROM indexer.messages m
        WHERE m.tenant_id = p_tenant AND m.occurred_at <= before
          AND (p_after_id IS NULL OR m.occurred_at < before OR m.message_id > p_after_id)
          AND m.terms @@ p_query
          AND (p_agent IS NULL OR m.agent_id = p_agent) AND (p_session_keys IS NULL OR m.session_key = ANY(p_session_keys))
        ORDER BY m.occurred_at DESC, m.message_id
        LIMIT p_cap;
    ELSE
        RETURN QUERY
        SELECT m.message_id, m.occurred_at, m.terms
        FROM indexer.messages m
        WHERE (m.tenant_id = p_tenant) IS TRUE AND indexer.tenant_terms(m.tenant_id, m.terms) @@ keyed
          AND m.occurred_at <= before AND (p_after_id IS NULL OR m.occurred_at < before OR m.message_id > p_after_id)
          AND m.terms @@ p_query
          AND (p_agent IS NULL OR m.agent_id = p_agent) AND (p_session_keys IS NULL OR m.session_key = ANY(p_session_keys))
        ORDER BY m.occurred_at DESC, m.message_id
        LIMIT p_cap;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION indexer.matching_messages(uuid, tsquery, text, text[], int, timestamptz, uuid, tsquery, float8)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.matching_messages(uuid, tsquery, text, text[], int, timestamptz, uuid, tsquery, float8)
    TO cairn_app;

-- The planner's estimate of the rows a keyed query matches (from the keys' statistics; one cheap EXPLAIN).
CREATE FUNCTION indexer.estimated_matches(p_keyed tsquery) RETURNS float8
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

CREATE OR REPLACE FUNCTION indexer.search_messages(
    p_tenant uuid, p_any tsquery, p_all tsquery, p_limit int, p_offset int, p_agent text, p_session_keys text[],
    p_lexemes text[], p_weights float8[], p_cap int
)
RETURNS TABLE (session_key text, session_id text, message_id text, role text, occurred_at timestamptz, text text,
               external_id text, score float8)
LANGUAGE plpgsql
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
#variable_conflict use_column
DECLARE
    any_query tsquery := CASE WHEN p_any = p_all THEN p_any ELSE p_any || p_all END;
BEGIN
    IF coalesce(current_setting('cairn.tenant_id', true), '') NOT IN ('', p_tenant::text) THEN
        RAISE EXCEPTION 'search_messages for tenant % inside a transaction of another tenant', p_tenant;
    END IF;
    PERFORM set_config('cairn.tenant_id', p_tenant::text, true);
    RETURN QUERY
    WITH some_term AS MATERIALIZED (
        SELECT s.message_id, s.occurred_at, s.terms, s.terms @@ p_all AS every
        FROM indexer.matching_messages(p_tenant, any_query, p_agent, p_session_keys, p_cap) s
    ),
    -- how far the any-term candidates reach back, and how many of them have every term
    reach AS MATERIALIZED (
        SELECT count(*)::int AS found, (count(*) FILTER (WHERE every))::int AS every,
               (array_agg(s.occurred_at ORDER BY s.occurred_at, s.message_id DESC))[1] AS oldest_at,
               (array_agg(s.message_id ORDER BY s.occurred_at, s.message_id DESC))[1] AS oldest_id
        FROM some_term s
    ),
    every_term AS MATERIALIZED (
        SELECT e.message_id, e.occurred_at, e.terms, true AS every
        FROM reach r,
             indexer.matching_messages(p_tenant, p_all, p_agent, p_session_keys, p_cap - r.every, r.oldest_at,
                                       r.oldest_id, any_query, r.every::float8 / greatest(r.found, 1)) e
        WHERE p_any <> p_all AND r.found >= p_cap AND r.every < p_cap
    ),
    candidates AS MATERIALIZED (
        SELECT * FROM some_term
        UNION ALL
        SELECT * FROM every_term
    ),
    hits AS (
        SELECT c.message_id, c.occurred_at, c.every, length(c.terms)::float8 AS length, term.lexeme,
               cardinality(term.positions)::float8 AS tf
        FROM candidates c, unnest(ts_filter(setweight(c.terms, 'A', p_lexemes), '{a}')) AS term
    ),
    stats AS MATERIALIZED (
        SELECT hits.lexeme, count(*)::float8 AS df, p_weights[array_position(p_lexemes, hits.lexeme)] AS weight
        FROM hits GROUP BY hits.lexeme
    ),
    corpus AS MATERIALIZED (
        SELECT greatest((SELECT least(coalesce(sum(n.messages), 0), 10000) FROM indexer.message_counts n
                         WHERE n.tenant_id = p_tenant),
                        (SELECT count(*) FROM candidates))::float8 AS n,
               (SELECT greatest(avg(length(terms)), 1) FROM candidates)::float8 AS length
    ),
    scored AS (
        SELECT hits.message_id, hits.occurred_at, hits.every,
               sum(stats.weight * ln(1 + (corpus.n - stats.df + 0.5) / (stats.df + 0.5))
                   * hits.tf * 1.9 / (hits.tf + 0.9 * (0.6 + 0.4 * hits.length / corpus.length))) AS bm25
        FROM hits JOIN stats ON stats.lexeme = hits.lexeme, corpus
        GROUP BY hits.message_id, hits.occurred_at, hits.every
    ),
    ranked AS (
        SELECT scored.message_id, scored.occurred_at,
               (CASE WHEN every THEN 1.0 ELSE 0.0 END + bm25 / (bm25 + 1))::float8 AS score
        FROM scored
        ORDER BY score DESC, scored.occurred_at DESC, scored.message_id
        LIMIT p_limit OFFSET p_offset
    )
    SELECT m.session_key, m.session_id::text, m.message_id::text, m.role, m.occurred_at, m.text, m.external_id,
           r.score
    FROM ranked r JOIN indexer.messages m ON m.tenant_id = p_tenant AND m.message_id = r.message_id
    ORDER BY r.score DESC, r.occurred_at DESC, r.message_id;
END
$$;
