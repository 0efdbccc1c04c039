-- Session search in one round trip (issue 4). A search used to be four: BEGIN with the tenant, SET LOCAL
-- plan_cache_mode, the query, COMMIT; on a busy machine every round trip waits for the scheduler. This
-- function is the whole search, called as one statement: it sets the tenant for its own transaction
-- (exactly what `tenant_transaction` does, and only when no other tenant was set), plans every call for
-- its parameters (the best plan depends on how common the terms are; a generic one had turned 5 ms into
-- 40 s) and ranks as before.
--
-- Ranking: BM25 over the query's lexemes (k1 0.9, b 0.4: Anserini's defaults, suited to short chat
-- messages), messages with every term first, then the more recent, then by id, so the order is stable and
-- pages never overlap. Candidates are the messages matching any term, in scope (visibility is part of the
-- WHERE clause, so hidden sessions never take a place under LIMIT), the most recent p_cap of them, plus the
-- most recent p_cap matching every term (so an older message with every term is never crowded out by recent
-- partial matches; skipped by a one-time filter when both queries are the same): every match in a tenant
-- of ordinary size, bounded work in the largest (0017 says why matching runs in its own function).
-- Document frequencies are counted over the candidates (exact when they are all of the matches); the
-- corpus size is the tenant's message count (0028) saturating at 10,000, never below the candidates; a
-- message's length is its number of distinct lexemes. Term frequencies come from the asked lexemes
-- alone, marked by setweight and kept by ts_filter (both in C): unnesting whole vectors costs five times
-- more. Document frequencies are one small aggregate per asked lexeme joined back (a window over every
-- term of every candidate sorted them all: a fifth of the time in the largest tenant). Every step scans
-- or aggregates the step before, or joins that to a handful of lexemes, so even a plan with poor
-- estimates stays linear in the candidates.
CREATE FUNCTION indexer.search_messages(
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
BEGIN
    IF coalesce(current_setting('cairn.tenant_id', true), '') NOT IN ('', p_tenant::text) THEN
        RAISE EXCEPTION 'search_messages for tenant % inside a transaction of another tenant', p_tenant;
    END IF;
    PERFORM set_config('cairn.tenant_id', p_tenant::text, true);
    RETURN QUERY
    WITH candidates AS MATERIALIZED (
        SELECT DISTINCT ON (message_id) message_id, occurred_at, terms, terms @@ p_all AS every
        FROM (
            SELECT * FROM indexer.matching_messages(p_tenant, p_any, p_agent, p_session_keys, p_cap)
            UNION ALL
            SELECT * FROM indexer.matching_messages(p_tenant, p_all, p_agent, p_session_keys, p_cap)
            WHERE p_any <> p_all
        ) matches
        ORDER BY message_id
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
REVOKE ALL ON FUNCTION indexer.search_messages(uuid, tsquery, tsquery, int, int, text, text[], text[], float8[], int)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.search_messages(uuid, tsquery, tsquery, int, int, text, text[], text[], float8[], int)
    TO cairn_app;
