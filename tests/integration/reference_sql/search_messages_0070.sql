-- 0070's indexer.search_messages (libs/platform migrations/0070_search_per_call_plan_and_even_walk.sql at commit 504bdc3), renamed: the reference the
-- test of a later ranking compares its answers with. Not part of any schema.
CREATE OR REPLACE FUNCTION indexer.search_messages_0070(
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
        SELECT s.message_id, s.occurred_at, s.terms @@ p_all AS every, length(s.terms) AS length,
               ts_filter(setweight(s.terms, 'A', p_lexemes), '{a}') AS asked
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
        SELECT e.message_id, e.occurred_at, true AS every, length(e.terms) AS length,
               ts_filter(setweight(e.terms, 'A', p_lexemes), '{a}') AS asked
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
    -- the page can be told from the every-term candidates alone when enough of them have an asked lexeme
    every_only AS MATERIALIZED (
        SELECT coalesce((SELECT bool_and(p_weights[array_position(p_lexemes, l)] > 0
                                         AND p_weights[array_position(p_lexemes, l)] <= 1000)
                         FROM unnest(p_lexemes) l)
                        AND count(*) FILTER (WHERE c.every AND length(c.asked) > 0) >= p_limit::bigint + p_offset,
                        false) AS page
        FROM candidates c
    ),
    -- the candidates scored: all, or the every-term ones when the page is theirs
    hits AS (
        SELECT t.message_id, t.occurred_at, t.every, t.length::float8 AS length, (t.term).lexeme,
               cardinality((t.term).positions)::float8 AS tf
        FROM (SELECT c.message_id, c.occurred_at, c.every, c.length, unnest(c.asked) AS term
              FROM candidates c, every_only o WHERE c.every OR NOT o.page) t
    ),
    -- the others' asked lexemes, counted for df only
    unscored AS (
        SELECT unnest(tsvector_to_array(c.asked)) AS lexeme
        FROM candidates c, every_only o WHERE NOT c.every AND o.page
    ),
    stats AS MATERIALIZED (
        SELECT l.lexeme, count(*)::float8 AS df, p_weights[array_position(p_lexemes, l.lexeme)] AS weight
        FROM (SELECT hits.lexeme FROM hits UNION ALL SELECT unscored.lexeme FROM unscored) l GROUP BY l.lexeme
    ),
    corpus AS MATERIALIZED (
        SELECT greatest((SELECT least(coalesce(sum(n.messages), 0), 10000) FROM indexer.message_counts n
                         WHERE n.tenant_id = p_tenant),
                        (SELECT count(*) FROM candidates))::float8 AS n,
               (SELECT greatest(avg(candidates.length), 1) FROM candidates)::float8 AS length
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
