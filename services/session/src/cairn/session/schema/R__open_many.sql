-- The session projection's prefetch: open the sessions a batch of messages needs, lock them, find stored adapter
-- ids.
-- Defined so by migration 0055_session_open_many.
--
-- The session projection's prefetch for a run of messages (of one tenant or several, see 0025): create the
-- sessions the messages open when their keys have none (and remember the new ids), lock and load every one
-- in key order, and find which adapter ids `(tenant, channel, external id)` are already stored. These were
-- three or four statements, each a round trip per fetched batch; now one call. The statements are the same
-- and run as the caller (SECURITY INVOKER), so row-level security and the locks are exactly as before.
-- Rows come back in two kinds: a locked session (`created` says whether this call made it; `external_id` is
-- NULL), then a stored adapter id (`session_id` is NULL; only tenant_id, channel and external_id are set).
CREATE OR REPLACE FUNCTION session.open_many(
    p_tenants uuid[], p_agents text[], p_keys text[], p_new_ids uuid[], p_chat_types text[], p_channels text[],
    p_ext_tenants uuid[], p_ext_channels text[], p_ext_ids text[]
)
RETURNS TABLE (
    tenant_id uuid, agent_id text, session_key text, created boolean, session_id uuid, chat_type text,
    last_position integer, reset_index integer, window_tokens bigint, window_bytes bigint,
    compaction_flagged boolean, compaction_cycle integer, last_activity_at timestamptz, context_window integer,
    reset_policy jsonb, reset_by_type jsonb, compaction jsonb, channel text, external_id text
)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $$
#variable_conflict use_column
DECLARE
    v_created uuid[];
BEGIN
    IF cardinality(p_keys) > 0 THEN
        WITH made AS (
            INSERT INTO session.sessions (tenant_id, agent_id, session_key, session_id, chat_type, channel)
            SELECT * FROM unnest(p_tenants, p_agents, p_keys, p_new_ids, p_chat_types, p_channels)
                AS k(tenant_id, agent_id, session_key, session_id, chat_type, channel)
            ON CONFLICT (tenant_id, agent_id, session_key) DO NOTHING
            RETURNING tenant_id, agent_id, session_key, session_id
        ), remembered AS (
            INSERT INTO session.key_sessions (tenant_id, agent_id, session_key, session_id)
            SELECT * FROM made
            ON CONFLICT DO NOTHING
        )
        SELECT coalesce(array_agg(made.session_id), '{}') INTO v_created FROM made;

        -- locked in key order, so two writers that ever meet (a partition changing hands) cannot deadlock
        RETURN QUERY
        SELECT s.tenant_id, s.agent_id, s.session_key, s.session_id = ANY(v_created), s.session_id, s.chat_type,
            s.last_position, s.reset_index, s.window_tokens, s.window_bytes, s.compaction_flagged,
            s.compaction_cycle, s.last_activity_at, a.context_window, a.reset_policy, a.reset_by_type,
            a.compaction, NULL::text, NULL::text
        FROM session.sessions s
        JOIN unnest(p_tenants, p_agents, p_keys) AS k(tenant_id, agent_id, session_key)
            USING (tenant_id, agent_id, session_key)
        LEFT JOIN session.agent_settings a ON a.tenant_id = s.tenant_id AND a.agent_id = s.agent_id
        ORDER BY s.tenant_id, s.agent_id, s.session_key
        FOR UPDATE OF s;
    END IF;

    IF cardinality(p_ext_ids) > 0 THEN
        RETURN QUERY
        SELECT e.tenant_id, NULL::text, NULL::text, NULL::boolean, NULL::uuid, NULL::text, NULL::integer,
            NULL::integer, NULL::bigint, NULL::bigint, NULL::boolean, NULL::integer, NULL::timestamptz,
            NULL::integer, NULL::jsonb, NULL::jsonb, NULL::jsonb, e.channel, e.external_id
        FROM session.entries e
        WHERE (e.tenant_id, e.channel, e.external_id) IN (SELECT * FROM unnest(p_ext_tenants, p_ext_channels, p_ext_ids))
          AND e.external_id IS NOT NULL;
    END IF;
END
$$;

GRANT EXECUTE ON FUNCTION session.open_many(uuid[], text[], text[], uuid[], text[], text[], uuid[], text[], text[])
    TO cairn_app;
