-- Memory search's lexical side: the most recent `cap` chunks of an agent matching a query, by whichever way reads
-- least.
-- Defined so by migration 0124_memory_matches_walk_by_bits_counts_its_index_entries.
--
-- Memory search speed (issue 5): the walk by term bits is weighed by the index entries it reads too, not only by
-- the chunks it fetches; a walk that cannot stop early (too few matches to reach the cap) reads them all.
--
-- 0108 took the walk by bits when its estimated fetches (cap x passed / matched chunks) were within
-- max(PLAIN_WALK_ROWS, the bitmap's estimated rows). It reads memory_chunks_recent back in time until it has
-- `cap` matches: about cap x seen / matched entries, and every entry of the agent when the agent holds fewer than
-- `cap` matches. On the realistic 100k seed (/work/notes/memsearch14.md) "What does Maria need to spread the word
-- about for the fundraiser for the volunteer shelter?" sampled matched=1, passed=6 of the 128 newest: 1,800
-- estimated fetches, so the walk by bits; the agent holds 163 matches, so it read all 100,000 entries (69k
-- buffers) and fetched 3,713 chunks: 110-250 ms (EXPLAIN ANALYZE: 51 ms in the index, 47 ms fetching), where the
-- bitmap answers the same 163 rows in 10-30 ms.
--
-- Now the walk by bits costs fetches + entries / ENTRIES_PER_FETCH (an index entry checked against the bits costs
-- about 1/25 of a chunk fetched by primary key: 0.5 us against 12.7 us in that plan), with entries =
-- cap x seen / matched, or all the agent's chunks (memory_counts) when its estimated matches (matched / seen x
-- chunks) are below the cap. The rest of the rule is 0108's. The three ways answer the same rows (the most recent `cap`
-- matches), so only the time changes.
--
-- Recall's lane 1 (issue 29) searches trusted entries only: `p_paths`, when given, keeps the chunks of these paths,
-- an entry ending in "/" standing for every path under it (`{MEMORY.md,memory/bank/}`). Filtered here, before the
-- cap and the ranking, so the many daily notes that match a query better cannot crowd a trusted entry out. Those
-- paths are usually a few of the agent's documents: their matches are read directly (the planner picks the agent's
-- path index or the terms index), without the sampling that chooses among the three ways. NULL: every path, as before.
-- First, though, the agent's newest 4 x cap chunks are walked by recency (memory_chunks_recent): when `cap` trusted
-- matches are among them they are the answer (the most recent `cap`, in the same order), and the direct read, which
-- takes every trusted match of the agent before keeping `cap`, never runs. That read cost lane 1 140 ms a query for
-- an agent of 100,000 trusted entries all matching (`cairn bench recall`'s worst case); the walk reads 1,200 index
-- entries and chunks whatever the agent's size, and answers nothing when it falls short, so the rows are the same.
-- When it falls short the paths' matches are read through the full-text keys' GIN (memory_matches_in_paths), not
-- by reading every chunk of the paths: 119 ms and 25,074 buffers at 100,000 trusted entries for the every-term half
-- of lane 1's lexical statement, whose words are rarely all in one entry.
DROP FUNCTION IF EXISTS indexer.matching_memory_chunks(uuid, text, text[], text, tsquery, int);
CREATE OR REPLACE FUNCTION indexer.matching_memory_chunks(
    p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap int,
    p_paths text[] DEFAULT NULL
)
RETURNS TABLE (chunk_id uuid, terms tsvector)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = indexer, pg_temp
AS $$
DECLARE
    sample_rows CONSTANT int := 128;
    plain_walk_rows CONSTANT int := 2000;
    bits_walk_rows CONSTANT int := 50000;
    entries_per_fetch CONSTANT int := 24;
    required bit(512);
    seen int;
    chunks bigint;
    matched int;
    passed int;  -- of the sample, the chunks holding every required bit: what the walk by bits fetches
    entries numeric;  -- what the walk by bits reads of memory_chunks_recent, estimated
    walked_rows bigint;
BEGIN
    IF p_tenant IS DISTINCT FROM cairn.current_tenant() THEN
        RETURN;
    END IF;
    IF p_paths IS NOT NULL THEN
        RETURN QUERY
            WITH walked AS MATERIALIZED (
                SELECT c.chunk_id, c.terms
                FROM (SELECT r.chunk_id, r.occurred_at FROM indexer.memory_chunks r
                      WHERE r.tenant_id = p_tenant AND r.agent_id = p_agent
                      ORDER BY r.occurred_at DESC NULLS LAST, r.chunk_id
                      LIMIT 4 * p_cap) w
                JOIN indexer.memory_chunks c ON c.tenant_id = p_tenant AND c.chunk_id = w.chunk_id
                WHERE c.source = ANY(p_sources)
                  AND (p_exclude_session_key IS NULL OR c.session_key IS DISTINCT FROM p_exclude_session_key)
                  AND EXISTS (SELECT 1 FROM unnest(p_paths) p
                              WHERE c.path = p OR (right(p, 1) = '/' AND starts_with(c.path, p)))
                  AND c.terms @@ p_query
                ORDER BY w.occurred_at DESC NULLS LAST, w.chunk_id
                LIMIT p_cap
            )
            SELECT k.chunk_id, k.terms FROM walked k WHERE (SELECT count(*) FROM walked) >= p_cap;
        GET DIAGNOSTICS walked_rows = ROW_COUNT;
        IF walked_rows > 0 THEN
            RETURN;
        END IF;
        RETURN QUERY SELECT m.chunk_id, m.terms
                     FROM indexer.memory_matches_in_paths(p_tenant, p_agent, p_sources, p_exclude_session_key, p_query,
                                                          p_cap, p_paths) m;
        RETURN;
    END IF;
    required := indexer.required_term_bits(p_query);
    chunks := coalesce((SELECT n.chunks FROM indexer.memory_counts n WHERE n.tenant_id = p_tenant AND n.agent_id = p_agent), 0);
    SELECT s.seen, s.matched, s.passed INTO seen, matched, passed
    FROM indexer.memory_matches_sample(p_tenant, p_agent, p_sources, p_exclude_session_key, p_query, required, sample_rows) s;
    IF seen < sample_rows OR matched::bigint * plain_walk_rows >= p_cap::bigint * seen THEN
        RETURN QUERY SELECT w.chunk_id, w.terms
                     FROM indexer.memory_matches_walking(p_tenant, p_agent, p_sources, p_exclude_session_key, p_query, p_cap) w;
        RETURN;
    END IF;
    IF matched::bigint * bits_walk_rows >= p_cap::bigint * seen AND required <> repeat('0', 512)::bit(512) THEN
        entries := CASE WHEN chunks > 0 AND matched::bigint * chunks < p_cap::bigint * seen
                        THEN chunks ELSE p_cap::numeric * seen / matched END;
        IF entries * passed / seen + entries / entries_per_fetch
           <= greatest(plain_walk_rows, matched::numeric * chunks / seen) THEN
            RETURN QUERY SELECT w.chunk_id, w.terms
                         FROM indexer.memory_matches_walking_by_bits(p_tenant, p_agent, p_sources, p_exclude_session_key, p_query, p_cap) w;
            RETURN;
        END IF;
    END IF;
    RETURN QUERY SELECT b.chunk_id, b.terms
                 FROM indexer.memory_matches_by_bitmap(p_tenant, p_agent, p_sources, p_exclude_session_key, p_query, p_cap) b;
END
$$;

REVOKE ALL ON FUNCTION indexer.matching_memory_chunks(uuid, text, text[], text, tsquery, int, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.matching_memory_chunks(uuid, text, text[], text, tsquery, int, text[]) TO cairn_app;
