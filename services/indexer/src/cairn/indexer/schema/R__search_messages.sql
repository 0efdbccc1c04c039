-- Session search in one call: matching (matching_messages, any term then every term), then BM25 ranking of the
-- candidates, a page of them.
-- Defined so by migration 0149_search_ranking_one_row_per_candidate.
--
-- Session search (issue 4, the 1M tail): search_messages ranks with one row per candidate instead of one per
-- (candidate, asked lexeme). 0070's ranking unnested each candidate's asked lexemes with their positions (6,000 rows
-- for 1,000 every-term candidates of 'release ERR_CONN_RESET'), counted df by GROUP BY, joined the rows to it and
-- summed them back by candidate: about a third of a tail query (~13 ms of ~40). Now, when the query has at most 8
-- distinct asked lexemes, all weighted (the bench's two-word queries have 2 to 7):
--   - the lexemes are "slots" in the order of a tsvector's lexemes (the order unnest gave), each as a one-lexeme
--     tsquery;
--   - per candidate, a slot's tf is 0 if `asked @@ slot` is false; else 1 if no asked lexeme occurs twice (the text
--     of `asked` has no comma: positions are the only commas of a tsvector's text, unless a lexeme holds one, and
--     then the count below runs); else the count of its positions, from unnest as before (~7 % of a tail query's
--     candidates);
--   - df of a slot is a count over the candidates, and BM25 is one expression per candidate: the same terms, in the
--     same order, 0 added where a slot is absent (x + 0 is x in floating point), so the scores are the same bits;
--   - the per-query constants (slots, idf, the page flag, the mean length) are read as InitPlan parameters, not
--     joined: a join to a one-row CTE rescans it for every candidate.
-- More lexemes, an empty or NULL one, fewer weights than lexemes or a NULL one: 0070's statement ranks, unchanged.
-- So does a tenant of fewer than 3,000 messages (message_counts, read by one statement only when the slots could
-- rank): the slots' larger plan costs a fixed ~0.3-0.7 ms a call, which few candidates do not win back. Ungated,
-- median per-query ratio against 0148 (200 bench queries, load 2-4): 600 messages 1.134, 1,210: 1.045, 1,600: 1.037,
-- 2,000/2,010: 1.037/1.020/1.017, 2,600: 1.004, 2,800: 0.976, 3,380: 0.989, 3,800: 0.981, 4,794: 0.966, 5,800: 0.928,
-- 13,810: 0.914. Gated, 600 messages: 1.019 (the count's statement).
-- Results are those of 0070 for every query (same ids, order, scores).
--
-- Measured in process on the bench's 1M index, copies of the function called interleaved (A B C / C B A), an
-- identical copy as control, results identical in every run (same ids, order and scores):
--   largest tenant (129,920 messages), the 50 slowest queries of earlier bench runs, 8 rounds, twice, load 2.5-3.5:
--     median per-query ratio 0.953 and 0.966 (control 1.014 and 1.028); per-query-median p99 40.6 -> 35.5 and
--     42.6 -> 40.6 ms;
--   largest tenant, the bench's 400 queries of seeds 7 and 23, 2 rounds, load 4.6: median ratio 0.901 (control 0.990);
--   66k / 13.8k tenants, 200 queries: 0.901 / 0.939 (control 0.993 / 1.026);
--   a 600-message tenant: 1.078 (control 0.996), p50 2.9 -> 3.3 ms: the larger plan costs a fixed ~0.3 ms a call.
-- (The runs above had the guard below as a NOT EXISTS statement; the 600-message figure is with this one.)
-- The ranking statement alone over a tail query's 1,927 materialized candidates: 12.2 -> 9.4 ms (best of 30).
CREATE OR REPLACE FUNCTION indexer.search_messages(
    p_tenant uuid, p_any tsquery, p_all tsquery, p_limit int, p_offset int, p_agent text, p_session_keys text[],
    p_lexemes text[], p_weights float8[], p_cap int
)
RETURNS TABLE (session_key text, session_id text, message_id text, role text, occurred_at timestamptz, text text,
               external_id text, score float8)
LANGUAGE plpgsql
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    any_query tsquery := CASE WHEN p_any = p_all THEN p_any ELSE p_any || p_all END;
    slot_count int;
    tenant_messages bigint;
BEGIN
    IF coalesce(current_setting('cairn.tenant_id', true), '') NOT IN ('', p_tenant::text) THEN
        RAISE EXCEPTION 'search_messages for tenant % inside a transaction of another tenant', p_tenant;
    END IF;
    PERFORM set_config('cairn.tenant_id', p_tenant::text, true);
    -- the slot ranking needs every asked lexeme non-empty and weighted (else the statement of 0070 ranks); plain
    -- expressions, which plpgsql evaluates without planning a statement
    IF array_position(p_lexemes, NULL) IS NULL AND array_position(p_lexemes, '') IS NULL
       AND cardinality(p_weights) >= cardinality(p_lexemes) AND array_position(p_weights, NULL) IS NULL THEN
        slot_count := length(array_to_tsvector(p_lexemes));
    END IF;
    -- and a tenant large enough for it to pay: its plan costs a fixed ~0.3-0.7 ms a call more, which a tenant under
    -- ~3,000 messages (and its few candidates) does not win back
    IF slot_count <= 8 THEN
        SELECT sum(n.messages) INTO tenant_messages FROM indexer.message_counts n WHERE n.tenant_id = p_tenant;
    END IF;
    IF tenant_messages >= 3000 THEN
        RETURN QUERY
        WITH some_term AS MATERIALIZED (
            SELECT s.message_id, s.occurred_at, s.terms @@ p_all AS every, s.terms
            FROM indexer.matching_messages(p_tenant, any_query, p_agent, p_session_keys, p_cap) s
        ),
        reach AS MATERIALIZED (
            SELECT count(*)::int AS found, (count(*) FILTER (WHERE every))::int AS every,
                   (array_agg(s.occurred_at ORDER BY s.occurred_at, s.message_id DESC))[1] AS oldest_at,
                   (array_agg(s.message_id ORDER BY s.occurred_at, s.message_id DESC))[1] AS oldest_id
            FROM some_term s
        ),
        every_term AS MATERIALIZED (
            SELECT e.message_id, e.occurred_at, true AS every, e.terms
            FROM reach r,
                 indexer.matching_messages(p_tenant, p_all, p_agent, p_session_keys, p_cap - r.every, r.oldest_at,
                                           r.oldest_id, any_query, r.every::float8 / greatest(r.found, 1)) e
            WHERE p_any <> p_all AND r.found >= p_cap AND r.every < p_cap
        ),
        -- the asked lexemes in the order of a tsvector's (the order unnest gives), each as a one-lexeme tsquery
        slots AS MATERIALIZED (
            SELECT l.lexemes,
                   l.queries[1] AS q1,
               l.queries[2] AS q2,
               l.queries[3] AS q3,
               l.queries[4] AS q4,
               l.queries[5] AS q5,
               l.queries[6] AS q6,
               l.queries[7] AS q7,
               l.queries[8] AS q8
            FROM (SELECT v.lexemes,
                         ARRAY(SELECT ('''' || replace(replace(x, '\', '\\'), '''', '''''') || '''')::tsquery
                               FROM unnest(v.lexemes) x) AS queries
                  FROM (SELECT tsvector_to_array(array_to_tsvector(p_lexemes)) AS lexemes) v) l
        ),
        -- one row per candidate: tf of each slot, 0 where it is absent; 1 without reading positions when no asked
        -- lexeme occurs twice (its text has no comma)
        candidates AS MATERIALIZED (
            SELECT c.message_id, c.occurred_at, c.every, length(c.terms) AS length, length(x.asked) AS present,
               CASE WHEN (SELECT s.q1 FROM slots s) IS NULL OR NOT x.asked @@ (SELECT s.q1 FROM slots s) THEN 0
                    WHEN x.single THEN 1
                    ELSE (SELECT cardinality(u.positions) FROM unnest(x.asked) u
                          WHERE u.lexeme = (SELECT s.lexemes[1] FROM slots s)) END AS tf1,
               CASE WHEN (SELECT s.q2 FROM slots s) IS NULL OR NOT x.asked @@ (SELECT s.q2 FROM slots s) THEN 0
                    WHEN x.single THEN 1
                    ELSE (SELECT cardinality(u.positions) FROM unnest(x.asked) u
                          WHERE u.lexeme = (SELECT s.lexemes[2] FROM slots s)) END AS tf2,
               CASE WHEN (SELECT s.q3 FROM slots s) IS NULL OR NOT x.asked @@ (SELECT s.q3 FROM slots s) THEN 0
                    WHEN x.single THEN 1
                    ELSE (SELECT cardinality(u.positions) FROM unnest(x.asked) u
                          WHERE u.lexeme = (SELECT s.lexemes[3] FROM slots s)) END AS tf3,
               CASE WHEN (SELECT s.q4 FROM slots s) IS NULL OR NOT x.asked @@ (SELECT s.q4 FROM slots s) THEN 0
                    WHEN x.single THEN 1
                    ELSE (SELECT cardinality(u.positions) FROM unnest(x.asked) u
                          WHERE u.lexeme = (SELECT s.lexemes[4] FROM slots s)) END AS tf4,
               CASE WHEN (SELECT s.q5 FROM slots s) IS NULL OR NOT x.asked @@ (SELECT s.q5 FROM slots s) THEN 0
                    WHEN x.single THEN 1
                    ELSE (SELECT cardinality(u.positions) FROM unnest(x.asked) u
                          WHERE u.lexeme = (SELECT s.lexemes[5] FROM slots s)) END AS tf5,
               CASE WHEN (SELECT s.q6 FROM slots s) IS NULL OR NOT x.asked @@ (SELECT s.q6 FROM slots s) THEN 0
                    WHEN x.single THEN 1
                    ELSE (SELECT cardinality(u.positions) FROM unnest(x.asked) u
                          WHERE u.lexeme = (SELECT s.lexemes[6] FROM slots s)) END AS tf6,
               CASE WHEN (SELECT s.q7 FROM slots s) IS NULL OR NOT x.asked @@ (SELECT s.q7 FROM slots s) THEN 0
                    WHEN x.single THEN 1
                    ELSE (SELECT cardinality(u.positions) FROM unnest(x.asked) u
                          WHERE u.lexeme = (SELECT s.lexemes[7] FROM slots s)) END AS tf7,
               CASE WHEN (SELECT s.q8 FROM slots s) IS NULL OR NOT x.asked @@ (SELECT s.q8 FROM slots s) THEN 0
                    WHEN x.single THEN 1
                    ELSE (SELECT cardinality(u.positions) FROM unnest(x.asked) u
                          WHERE u.lexeme = (SELECT s.lexemes[8] FROM slots s)) END AS tf8
            FROM (SELECT * FROM some_term UNION ALL SELECT * FROM every_term) c
                 CROSS JOIN LATERAL (
                     SELECT y.asked, strpos(y.asked::text, ',') = 0 AS single
                     FROM (SELECT ts_filter(setweight(c.terms, 'A', p_lexemes), '{a}') AS asked OFFSET 0) y
                     OFFSET 0) x
        ),
        corpus AS MATERIALIZED (
            SELECT coalesce((SELECT bool_and(p_weights[array_position(p_lexemes, l)] > 0
                                             AND p_weights[array_position(p_lexemes, l)] <= 1000)
                             FROM unnest(p_lexemes) l)
                            AND count(*) FILTER (WHERE c.every AND c.present > 0) >= p_limit::bigint + p_offset,
                            false) AS page,
                   greatest((SELECT least(coalesce(sum(n.messages), 0), 10000) FROM indexer.message_counts n
                             WHERE n.tenant_id = p_tenant), count(*))::float8 AS n,
                   greatest(avg(c.length), 1)::float8 AS length,
                   ARRAY[count(*) FILTER (WHERE c.tf1 > 0),
                         count(*) FILTER (WHERE c.tf2 > 0),
                         count(*) FILTER (WHERE c.tf3 > 0),
                         count(*) FILTER (WHERE c.tf4 > 0),
                         count(*) FILTER (WHERE c.tf5 > 0),
                         count(*) FILTER (WHERE c.tf6 > 0),
                         count(*) FILTER (WHERE c.tf7 > 0),
                         count(*) FILTER (WHERE c.tf8 > 0)]::float8[] AS df
            FROM candidates c
        ),
        idf AS MATERIALIZED (
            SELECT w.idf[1] AS idf1, w.idf[2] AS idf2, w.idf[3] AS idf3, w.idf[4] AS idf4,
                   w.idf[5] AS idf5, w.idf[6] AS idf6, w.idf[7] AS idf7, w.idf[8] AS idf8
            FROM (SELECT ARRAY(SELECT p_weights[array_position(p_lexemes, s.lexemes[i])]
                                      * ln(1 + (o.n - o.df[i] + 0.5) / (o.df[i] + 0.5))
                               FROM generate_subscripts(s.lexemes, 1) i ORDER BY i) AS idf
                  FROM slots s, corpus o) w
        ),
        scored AS (
            SELECT c.message_id, c.occurred_at, c.every,
                   CASE WHEN c.tf1 > 0 OR c.tf2 > 0 OR c.tf3 > 0 OR c.tf4 > 0
                             OR c.tf5 > 0 OR c.tf6 > 0 OR c.tf7 > 0 OR c.tf8 > 0 THEN
                   CASE WHEN c.tf1 > 0 THEN (SELECT i.idf1 FROM idf i) * c.tf1::float8 * 1.9
                        / (c.tf1::float8 + 0.9 * (0.6 + 0.4 * c.length::float8 / (SELECT o.length FROM corpus o)))
                    ELSE 0 END
                 + CASE WHEN c.tf2 > 0 THEN (SELECT i.idf2 FROM idf i) * c.tf2::float8 * 1.9
                        / (c.tf2::float8 + 0.9 * (0.6 + 0.4 * c.length::float8 / (SELECT o.length FROM corpus o)))
                    ELSE 0 END
                 + CASE WHEN c.tf3 > 0 THEN (SELECT i.idf3 FROM idf i) * c.tf3::float8 * 1.9
                        / (c.tf3::float8 + 0.9 * (0.6 + 0.4 * c.length::float8 / (SELECT o.length FROM corpus o)))
                    ELSE 0 END
                 + CASE WHEN c.tf4 > 0 THEN (SELECT i.idf4 FROM idf i) * c.tf4::float8 * 1.9
                        / (c.tf4::float8 + 0.9 * (0.6 + 0.4 * c.length::float8 / (SELECT o.length FROM corpus o)))
                    ELSE 0 END
                 + CASE WHEN c.tf5 > 0 THEN (SELECT i.idf5 FROM idf i) * c.tf5::float8 * 1.9
                        / (c.tf5::float8 + 0.9 * (0.6 + 0.4 * c.length::float8 / (SELECT o.length FROM corpus o)))
                    ELSE 0 END
                 + CASE WHEN c.tf6 > 0 THEN (SELECT i.idf6 FROM idf i) * c.tf6::float8 * 1.9
                        / (c.tf6::float8 + 0.9 * (0.6 + 0.4 * c.length::float8 / (SELECT o.length FROM corpus o)))
                    ELSE 0 END
                 + CASE WHEN c.tf7 > 0 THEN (SELECT i.idf7 FROM idf i) * c.tf7::float8 * 1.9
                        / (c.tf7::float8 + 0.9 * (0.6 + 0.4 * c.length::float8 / (SELECT o.length FROM corpus o)))
                    ELSE 0 END
                 + CASE WHEN c.tf8 > 0 THEN (SELECT i.idf8 FROM idf i) * c.tf8::float8 * 1.9
                        / (c.tf8::float8 + 0.9 * (0.6 + 0.4 * c.length::float8 / (SELECT o.length FROM corpus o)))
                    ELSE 0 END
                   END AS bm25
            FROM candidates c
            WHERE (c.every OR NOT (SELECT o.page FROM corpus o)) AND c.present > 0
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
        RETURN;
    END IF;
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

REVOKE ALL ON FUNCTION indexer.search_messages(uuid, tsquery, tsquery, int, int, text, text[], text[], float8[], int)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.search_messages(uuid, tsquery, tsquery, int, int, text, text[], text[], float8[], int)
    TO cairn_app;
