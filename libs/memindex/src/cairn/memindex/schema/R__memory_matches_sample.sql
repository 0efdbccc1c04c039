-- matching_memory_chunks's sample of an agent's newest chunks: how many match, how many hold the required bits.
-- Defined so by migration 0108_memory_matches_walk_by_bits_only_when_the_bits_prune.
--
-- Memory search speed (issue 5): the walk by term bits is taken only when the bits leave out most of the chunks
-- it walks; when they do not, the full-text index answers.
--
-- matching_memory_chunks (0059) took the walk by bits whenever the agent's 128 newest chunks held enough
-- matches for it to reach the cap within BITS_WALK_ROWS chunks, assuming the bits would spare it most rows.
-- On long chunks of real conversation they do not: a chunk of 20 LoCoMo turns sets ~200 of the 512 bits, and a
-- question pairing a name present in nearly every chunk with common words ("When did Maria meet Jean?":
-- 'maria' & 'meet' & 'jean') has required bits that ~90% of chunks hold. On the realistic 100k seed
-- (/work/notes/memlex13.md) that walk read 93,473 index entries, fetched every one of those chunks by primary
-- key (94,209 buffers read) for 228 matches: 4.3-7.4 s, where the full-text index answered the same rows in
-- 11-43 ms. The same shape ("When did Caroline go biking with friends?", "What are the new shoes that Caroline
-- got used for?") fetched 29,000-31,000 chunks (0.6-0.9 s) for 300 matches; the index, 40-63 ms.
--
-- Now the sample also counts how many of the newest chunks hold the required bits (`passed`). The walk by bits
-- fetches about cap x passed / matched chunks by primary key; the index's bitmap reads about matched / seen of
-- the agent's chunks (its count in memory_counts). The walk by bits is taken only when its fetches are no more
-- than the bitmap's rows, or than PLAIN_WALK_ROWS (what a plain walk may read; all an agent without a count
-- gets); otherwise the bitmap. The three ways answer the same rows (the most recent `cap` matches), so only
-- the time changes. Measured A/B on that seed (the bench's 200 questions, all-terms and any-terms statements,
-- alternating; memlex13.md): identical rows 400/400, p99 356 -> 101 ms, max 1,204 -> 132 ms, total 0.80; a
-- few questions near the line between the walk and the bitmap lose (64 -> 132 ms at worst).
-- Same signature, same answers, same grants for matching_memory_chunks: callers do not change.
CREATE OR REPLACE FUNCTION indexer.memory_matches_sample(
    p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_required bit(512),
    p_rows int, OUT seen int, OUT matched int, OUT passed int
)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_custom_plan
SET enable_bitmapscan = off
SET enable_seqscan = off
SET enable_sort = off
AS $$
    SELECT count(*)::int, (count(*) FILTER (WHERE newest.terms @@ p_query))::int,
           (count(*) FILTER (WHERE (newest.term_bits & p_required) = p_required))::int
    FROM (
        SELECT c.terms, c.term_bits FROM indexer.memory_chunks c
        WHERE c.tenant_id = p_tenant AND p_tenant = cairn.current_tenant() AND c.agent_id = p_agent
          AND c.source = ANY(p_sources) AND (p_exclude_session_key IS NULL OR c.session_key IS DISTINCT FROM p_exclude_session_key)
        ORDER BY c.occurred_at DESC NULLS LAST, c.chunk_id
        LIMIT p_rows
    ) newest
$$;

REVOKE ALL ON FUNCTION indexer.memory_matches_sample(uuid, text, text[], text, tsquery, bit, int) FROM PUBLIC;
