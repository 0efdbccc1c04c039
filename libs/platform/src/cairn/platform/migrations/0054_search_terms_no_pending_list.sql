-- Session search in the largest tenant at 1M messages (issue 4): the messages' tenant-keyed GIN (0039) takes each
-- insert into its main structure (fastupdate = off), as the memory chunks' index does (0045). With the default,
-- new messages wait in an unsorted pending list (up to gin_pending_list_limit, 4 MB) until a vacuum or a full
-- list merges them, and every search that reads the index — a rare term, most searches — reads and checks that
-- whole list, whatever its tenant: with messages arriving all day it is seldom empty. Measured on a 1M-message
-- index with ~190 pending pages: the keys' bitmap scan read 266 pages for a two-word query, most of them the
-- list. The indexer writes a tenant's messages in batches; each row's keys now go into the index as they are
-- written (the cost is measured with `cairn bench ingest`, see notes/search8.md). What is pending now is merged
-- here.
ALTER INDEX indexer.messages_tenant_terms SET (fastupdate = off);
SELECT gin_clean_pending_list('indexer.messages_tenant_terms'::regclass);

-- A walk is bounded (added to this migration after it first landed; a database that applied it before keeps
-- 0052's unbounded walk, with the same results). The walk reads about size·cap/matches rows when the matches are
-- spread evenly in time; when they are not — the every-term search's estimate comes from the share of every-term
-- messages among the most recent any-term ones (0052), and a topic can be common lately and rare before — it read
-- the rest of the tenant for a few rows ("429 Too Many" in the largest tenant: 46,866 rows for 33 matches, where
-- the keys fetch ~560). It now reads at most four times the rows it expects, and the keys find the matches
-- older than the last one it returned (every match among the rows it read was returned). And the estimate is never above the tenant's size (see below); with it a rare
-- term in a small tenant is read through the keys, whose default estimate (thousands of rows for a key missing
-- from the statistics) made the planner start parallel workers for a bitmap of no rows (~40 ms under load):
-- matching runs without parallel workers.
CREATE OR REPLACE FUNCTION indexer.matching_messages(
    p_tenant uuid, p_query tsquery, p_agent text, p_session_keys text[], p_cap int,
    p_after_at timestamptz DEFAULT NULL, p_after_id uuid DEFAULT NULL, p_within tsquery DEFAULT NULL,
    p_share float8 DEFAULT 0
)
RETURNS TABLE (message_id uuid, occurred_at timestamptz, terms tsvector)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- EXPLAIN is refused in a STABLE function
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_custom_plan
SET max_parallel_workers_per_gather = 0  -- one tenant's few pages: starting workers costs more (below)
AS $$
#variable_conflict use_column
DECLARE
    keyed tsquery := indexer.tenant_terms_query(p_tenant, p_query);
    matches float8;
    size float8;
    before timestamptz := coalesce(p_after_at, 'infinity');
    after_id uuid := p_after_id;
    wanted int := p_cap;
    visits bigint;
    walked bigint := 0;
    hit record;
    last_at timestamptz;
    last_id uuid;
BEGIN
    IF p_tenant IS DISTINCT FROM cairn.current_tenant() OR p_cap <= 0 THEN
        RETURN;
    END IF;
    matches := indexer.estimated_matches(keyed);
    IF p_within IS NOT NULL AND p_share > 0 THEN
        matches := greatest(matches, p_share * indexer.estimated_matches(indexer.tenant_terms_query(p_tenant, p_within)));
    END IF;
    size := (SELECT coalesce(sum(n.messages), 0) FROM indexer.message_counts n WHERE n.tenant_id = p_tenant);
    -- never more matches than messages: a key missing from the index's statistics (a rare term, a small tenant's)
    -- gets a default share of the whole table, a thousand rows at 1M, and a tenant of 600 messages walked them all
    matches := least(matches, size);
    -- 0039: walking from the newest reads about size·cap/matches rows, the keys read every match.
    IF matches * matches > size * p_cap THEN
        visits := ceil(4 * size * p_cap / matches);
        -- row by row, to know the oldest it returns: the keys take over strictly after that row, so no row comes
        -- twice and none is skipped even if messages arrive or go between the two statements
        FOR hit IN
            SELECT v.message_id, v.occurred_at, v.terms
            FROM (
                SELECT m.message_id, m.occurred_at, m.terms, m.agent_id, m.session_key
                FROM indexer.messages m
                WHERE m.tenant_id = p_tenant AND m.occurred_at <= before
                  AND (after_id IS NULL OR m.occurred_at < before OR m.message_id > after_id)
                ORDER BY m.occurred_at DESC, m.message_id
                LIMIT visits
            ) v
            WHERE v.terms @@ p_query
              AND (p_agent IS NULL OR v.agent_id = p_agent) AND (p_session_keys IS NULL OR v.session_key = ANY(p_session_keys))
            ORDER BY v.occurred_at DESC, v.message_id
            LIMIT p_cap
        LOOP
            message_id := hit.message_id;
            occurred_at := hit.occurred_at;
            terms := hit.terms;
            RETURN NEXT;
            walked := walked + 1;
            last_at := hit.occurred_at;
            last_id := hit.message_id;
        END LOOP;
        IF walked >= p_cap THEN
            RETURN;
        END IF;
        -- every match among the rows the walk read was returned: the rest are older than the last one returned
        IF walked > 0 THEN
            before := last_at;
            after_id := last_id;
        END IF;
        wanted := p_cap - walked;
    END IF;
    RETURN QUERY
    SELECT m.message_id, m.occurred_at, m.terms
    FROM indexer.messages m
    WHERE (m.tenant_id = p_tenant) IS TRUE AND indexer.tenant_terms(m.tenant_id, m.terms) @@ keyed
      AND m.occurred_at <= before AND (after_id IS NULL OR m.occurred_at < before OR m.message_id > after_id)
      AND m.terms @@ p_query
      AND (p_agent IS NULL OR m.agent_id = p_agent) AND (p_session_keys IS NULL OR m.session_key = ANY(p_session_keys))
    ORDER BY m.occurred_at DESC, m.message_id
    LIMIT wanted;
END
$$;
