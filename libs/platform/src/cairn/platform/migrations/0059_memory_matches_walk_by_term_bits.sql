-- Memory search speed (issue 5): a walk back in time reads only the chunks that can hold every required term.
-- Walking an agent's chunks costs a heap row per chunk (~3 us quiet, fetch and `@@`), and a conjunction that
-- matches 1% of a 100k-chunk agent walks ~28,000 of them to find the 300 most recent matches (the bench's
-- 10-word queries: most of memory search's p99). Now every chunk also keeps `term_bits`: one bit of 512 per
-- lexeme (a hash of it), a generated column, so every writer fills it. The recency index carries it (with
-- the source and session the walk filters on), and a walk for a query with required lexemes reads the index
-- only, keeps the chunks whose bits hold every required lexeme's bit, and fetches the row of those alone
-- (measured: 481 of 28,361 on the 10-word query, 1.1% of them real matches). A missing bit proves a missing
-- lexeme, so no match is ever skipped; a set bit may be another lexeme's, and the row's `terms @@ q` decides.
--
-- The required lexemes of a query are found without parsing its shape: a lexeme is required when the query
-- does not match all its other lexemes. Queries with NOT, phrases, prefixes or weights get no bits (a plain
-- walk), as presence alone does not decide them.
--
-- matching_memory_chunks (0058) now chooses among three ways from the agent's 128 newest chunks: a plain walk
-- when their match rate reaches the cap within PLAIN_WALK_ROWS chunks (a probe by primary key per kept chunk
-- costs more than the heap row the plain walk reads next), the walk by bits up to BITS_WALK_ROWS chunks
-- (an index entry costs ~1/5 of a heap row), else the full-text index.
--
-- Adding the column rewrites the table (and rebuilds its indexes, the HNSW graphs included): minutes per
-- million chunks, once.

-- One bit per lexeme (of 512, by hashtext): ~25 lexemes of a short chunk set ~5% of them, a 20-turn chunk ~30%.
CREATE FUNCTION indexer.term_bits(p_terms tsvector) RETURNS bit(512)
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
RETURN (SELECT coalesce(bit_or(set_bit(repeat('0', 512)::bit(512), hashtext(lexeme) & 511, 1)), repeat('0', 512)::bit(512))
        FROM unnest(tsvector_to_array(p_terms)) AS lexeme);

-- The bits of the lexemes every match of the query holds (none: no walk by bits).
CREATE FUNCTION indexer.required_term_bits(p_query tsquery) RETURNS bit(512)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT
SET search_path = indexer, pg_temp
AS $$
DECLARE
    none CONSTANT bit(512) := repeat('0', 512)::bit(512);
    required bit(512) := repeat('0', 512)::bit(512);
    lexemes text[];
    lexeme text;
BEGIN
    IF p_query::text ~ '!|<|'':[A-Da-d*]' THEN  -- NOT, phrases, prefixes, weights
        RETURN none;
    END IF;
    lexemes := ARRAY(SELECT DISTINCT replace(replace(m[1], '''''', ''''), '\\', '\')  -- as written: '' and \\ doubled
                     FROM regexp_matches(p_query::text, $re$'((?:[^']|'')*)'$re$, 'g') AS m);
    IF cardinality(lexemes) = 0 OR NOT array_to_tsvector(lexemes) @@ p_query THEN
        RETURN none;
    END IF;
    FOREACH lexeme IN ARRAY lexemes LOOP
        IF NOT array_to_tsvector(array_remove(lexemes, lexeme)) @@ p_query THEN
            required := required | set_bit(none, hashtext(lexeme) & 511, 1);
        END IF;
    END LOOP;
    RETURN required;
END
$$;

ALTER TABLE indexer.memory_chunks ADD COLUMN term_bits bit(512) GENERATED ALWAYS AS (indexer.term_bits(terms)) STORED;
DROP INDEX indexer.memory_chunks_recent;
CREATE INDEX memory_chunks_recent ON indexer.memory_chunks (tenant_id, agent_id, occurred_at DESC NULLS LAST, chunk_id)
    INCLUDE (source, session_key, term_bits);

CREATE FUNCTION indexer.memory_matches_walking_by_bits(
    p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap int
)
RETURNS TABLE (chunk_id uuid, terms tsvector)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_custom_plan
SET enable_bitmapscan = off
SET enable_seqscan = off
SET enable_sort = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_material = off
AS $$
    SELECT m.chunk_id, m.terms
    FROM (
        SELECT c.chunk_id, c.occurred_at
        FROM indexer.memory_chunks c
        WHERE c.tenant_id = p_tenant AND p_tenant = cairn.current_tenant() AND c.agent_id = p_agent
          AND c.source = ANY(p_sources) AND (p_exclude_session_key IS NULL OR c.session_key IS DISTINCT FROM p_exclude_session_key)
          AND (c.term_bits & indexer.required_term_bits(p_query)) = indexer.required_term_bits(p_query)
        ORDER BY c.occurred_at DESC NULLS LAST, c.chunk_id
    ) kept
    CROSS JOIN LATERAL (
        SELECT r.chunk_id, r.terms FROM indexer.memory_chunks r
        WHERE r.tenant_id = p_tenant AND r.chunk_id = kept.chunk_id AND r.terms @@ p_query
    ) m
    ORDER BY kept.occurred_at DESC NULLS LAST, kept.chunk_id
    LIMIT p_cap
$$;
REVOKE ALL ON FUNCTION indexer.memory_matches_walking_by_bits(uuid, text, text[], text, tsquery, int) FROM PUBLIC;

CREATE OR REPLACE FUNCTION indexer.matching_memory_chunks(
    p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap int
)
RETURNS TABLE (chunk_id uuid, terms tsvector)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = indexer, pg_temp
AS $$
DECLARE
    sample_rows CONSTANT int := 128;
    plain_walk_rows CONSTANT int := 2000;
    bits_walk_rows CONSTANT int := 50000;
    seen int;
    matched int;
BEGIN
    IF p_tenant IS DISTINCT FROM cairn.current_tenant() THEN
        RETURN;
    END IF;
    SELECT s.seen, s.matched INTO seen, matched
    FROM indexer.memory_matches_among_newest(p_tenant, p_agent, p_sources, p_exclude_session_key, p_query, sample_rows) s;
    IF seen < sample_rows OR matched::bigint * plain_walk_rows >= p_cap::bigint * seen THEN
        RETURN QUERY SELECT w.chunk_id, w.terms
                     FROM indexer.memory_matches_walking(p_tenant, p_agent, p_sources, p_exclude_session_key, p_query, p_cap) w;
    ELSIF matched::bigint * bits_walk_rows >= p_cap::bigint * seen
          AND indexer.required_term_bits(p_query) <> repeat('0', 512)::bit(512) THEN
        RETURN QUERY SELECT w.chunk_id, w.terms
                     FROM indexer.memory_matches_walking_by_bits(p_tenant, p_agent, p_sources, p_exclude_session_key, p_query, p_cap) w;
    ELSE
        RETURN QUERY SELECT b.chunk_id, b.terms
                     FROM indexer.memory_matches_by_bitmap(p_tenant, p_agent, p_sources, p_exclude_session_key, p_query, p_cap) b;
    END IF;
END
$$;
