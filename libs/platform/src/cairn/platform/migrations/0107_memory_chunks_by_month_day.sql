-- Memory search speed (issue 5): the chunks dated on a day a query names are read from an index, not found by
-- reading every chunk of the agent. A question naming a day ("what did Jon find on 1 February, 2023?") adds
-- the chunks dated on it to the candidates (recall's ON_DAYS); its filter, `to_char(…, 'MM-DD')` of the chunk's
-- day, had no index, so Postgres read all of an agent's chunks (heap rows) and kept none: on 100,000 realistic
-- chunks (bench memindex --data locomo) ~0.5-0.8 s of such a search, the whole p99 of memory search
-- (/work/notes/memsearch13.md).
--
-- A chunk's day is its `dated` (a daily note's day), else the UTC day of `occurred_at`: the day recall's Python
-- checks the year on (`on_day`). The old expression cast `dated` to timestamptz in the session's time zone and
-- back to UTC, the same day only while the server's zone is UTC; this one is the day itself in any zone.
-- 'MM-DD' spells no month or weekday name, so to_char here does not depend on the locale: IMMUTABLE is true.
CREATE FUNCTION indexer.memory_month_day(p_dated date, p_occurred_at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN to_char(coalesce(p_dated::timestamp, p_occurred_at AT TIME ZONE 'UTC'), 'MM-DD');

-- Read by (tenant, agent, day), in the statement's order within a day: built once (seconds per 100,000 chunks).
CREATE INDEX memory_chunks_month_day ON indexer.memory_chunks
    (tenant_id, agent_id, indexer.memory_month_day(dated, occurred_at), occurred_at, start_line);

-- Under row-level security the index cannot serve the query of cairn_app: the day's expression is not LEAKPROOF
-- (to_char is not, and only a superuser may mark it), so Postgres evaluates it after the tenant policy, over
-- every chunk of the tenant (as 0031 says of `@@`). The read runs as the owner, answering only for the tenant of
-- the calling transaction, like matching_memory_chunks.
CREATE FUNCTION indexer.memory_chunks_on_days(
    p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_days text[], p_limit int
)
RETURNS TABLE (chunk_id uuid)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
    SELECT c.chunk_id
    FROM indexer.memory_chunks c
    WHERE c.tenant_id = p_tenant AND p_tenant = cairn.current_tenant() AND c.agent_id = p_agent
      AND c.source = ANY(p_sources) AND (p_exclude_session_key IS NULL OR c.session_key IS DISTINCT FROM p_exclude_session_key)
      AND indexer.memory_month_day(c.dated, c.occurred_at) = ANY(p_days)
    ORDER BY c.occurred_at, c.start_line, c.chunk_id
    LIMIT p_limit
$$;
REVOKE ALL ON FUNCTION indexer.memory_chunks_on_days(uuid, text, text[], text, text[], int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.memory_chunks_on_days(uuid, text, text[], text, text[], int) TO cairn_app;
