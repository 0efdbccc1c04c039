-- Full-text matching under row-level security could not use the full-text index: `@@` is not
-- LEAKPROOF (and only a superuser may mark it), so Postgres evaluates it after the tenant policy, as a
-- filter over every row of the tenant. Matching therefore runs in a SECURITY DEFINER function as the
-- owner, for whom indexer.messages is no longer forced, so the (tenant_id, terms) index does the work.
-- Isolation holds: the function answers only for the tenant of the calling transaction
-- (cairn.current_tenant()), and cairn_app still sees the table through the policy everywhere else.
-- Candidates are the most recent `cap` matches, the order every search ranks from.
ALTER TABLE indexer.messages NO FORCE ROW LEVEL SECURITY;

CREATE FUNCTION indexer.matching_messages(p_tenant uuid, p_query tsquery, p_agent text, p_session_keys text[], p_cap int)
RETURNS TABLE (message_id uuid, occurred_at timestamptz, terms tsvector)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
    SELECT m.message_id, m.occurred_at, m.terms
    FROM indexer.messages m
    WHERE m.tenant_id = p_tenant AND p_tenant = cairn.current_tenant() AND m.terms @@ p_query
      AND (p_agent IS NULL OR m.agent_id = p_agent) AND (p_session_keys IS NULL OR m.session_key = ANY(p_session_keys))
    ORDER BY m.occurred_at DESC, m.message_id
    LIMIT p_cap
$$;
REVOKE ALL ON FUNCTION indexer.matching_messages(uuid, tsquery, text, text[], int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.matching_messages(uuid, tsquery, text, text[], int) TO cairn_app;
