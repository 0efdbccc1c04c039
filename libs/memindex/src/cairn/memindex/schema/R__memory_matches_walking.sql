-- One way of matching_memory_chunks: walk the agent's chunks back in time until `cap` match.
-- Defined so by migration 0058_memory_matches_plan_per_call.
--
-- From that migration's header:
-- Memory search speed (issue 5): the lexical side's plan is chosen per call from the agent's own newest chunks.
-- `matching_memory_chunks` (0031) left the choice between walking the agent's chunks back in time (stops after
-- `cap` matches) and a bitmap of the full-text index to the planner, whose estimate for `terms @@ q` comes from
-- the whole table's statistics: one tenant's vocabulary decided another's plan. Measured on a 100k-chunk agent
-- (memspeed7, memspeed8): a 10-word conjunction matching 1% of the agent walked 28,000 chunks, and once a
-- second large agent changed the statistics a 6-word one took the bitmap (3-5x the walk).
--
-- Now the function reads the agent's newest SAMPLE_ROWS eligible chunks first and counts the matches among
-- them. When that rate finds `cap` matches within WALK_ROWS chunks (or the agent has fewer than the sample),
-- it walks; otherwise it reads the full-text index. Each way is a function of its own with its plan forced
-- (planner settings on the function), and both return the same rows: the most recent `cap` matches.
-- WALK_ROWS 10,000: about where the walk and the index cost the same on the synthetic bench's worst case (38
-- words everywhere). SAMPLE_ROWS 128: on a 1% conjunction 4 or more matches (a walk) come 4% of the time, on a
-- 7% one 3 or fewer (the index) 0.6%; the sample costs ~1/80 of a 10,000-chunk walk.
--
-- The full-text index holds tenant-qualified keys, as session search's does since 0039 (which says why: a
-- multicolumn (tenant_id, terms) GIN decodes the tenant's whole posting list on every search). It is also
-- what makes the index way forceable: the tenant's and the agent's conditions are written so that no index
-- can take them (`IS TRUE`), so the keys are the only index left (a btree bitmap of the agent's rows, which
-- the planner took for an agent its statistics did not know yet, reads every chunk of the agent).
-- Same signature, same answers, same grants for matching_memory_chunks: callers do not change.
CREATE OR REPLACE FUNCTION indexer.memory_matches_walking(
    p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap int
)
RETURNS TABLE (chunk_id uuid, terms tsvector)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_custom_plan
SET enable_bitmapscan = off
SET enable_seqscan = off
SET enable_sort = off
AS $$
    SELECT c.chunk_id, c.terms
    FROM indexer.memory_chunks c
    WHERE c.tenant_id = p_tenant AND p_tenant = cairn.current_tenant() AND c.agent_id = p_agent
      AND c.source = ANY(p_sources) AND (p_exclude_session_key IS NULL OR c.session_key IS DISTINCT FROM p_exclude_session_key)
      AND c.terms @@ p_query
    ORDER BY c.occurred_at DESC NULLS LAST, c.chunk_id
    LIMIT p_cap
$$;

REVOKE ALL ON FUNCTION indexer.memory_matches_walking(uuid, text, text[], text, tsquery, int) FROM PUBLIC;
