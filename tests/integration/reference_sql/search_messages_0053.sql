-- 0053's indexer.search_messages (libs/platform migrations/0053_search_ranking_streamed.sql at commit 504bdc3), renamed: the reference the
-- test of a later ranking compares its answers with. Not part of any schema.
-- Session search in the largest tenant at 1M messages (issue 4): the same ranking with less work per candidate.
--
-- Profile of the slowest searches there after 0052 (two common words, ~1,900 candidates): ranking was about half
-- of the time, most of it unnesting each candidate's asked lexemes. `unnest(tsvector)` in FROM is a function scan,
-- which fills a tuplestore for every candidate; in the select list it is a ProjectSet, streamed (on 1,886
-- candidates: 97 → 73 ms for the whole ranking, same rows and scores). And each candidate's asked lexemes are
-- picked out (setweight + ts_filter, 0029) as soon as it is found, so the candidates carry those few lexemes and
-- the message's length instead of its whole vector through every later step.

CREATE OR REPLACE FUNCTION indexer.search_messages_0053(
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
    hits AS (
        SELECT t.message_id, t.occurred_at, t.every, t.length::float8 AS length, (t.term).lexeme,
               cardinality((t.term).positions)::float8 AS tf
        FROM (SELECT c.message_id, c.occurred_at, c.every, c.length, unnest(c.asked) AS term FROM candidates c) t
    ),
    stats AS MATERIALIZED (
        SELECT hits.lexeme, count(*)::float8 AS df, p_weights[array_position(p_lexemes, hits.lexeme)] AS weight
        FROM hits GROUP BY hits.lexeme
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
