-- Session search in the largest tenant at 1M messages (issue 4). The full-text index was a multicolumn GIN
-- (tenant_id, terms) (0016). A multicolumn GIN keeps each column's keys apart, so every search decoded the
-- tenant's whole posting list (120k rows in the largest tenant) and intersected it with each term's posting
-- list across every tenant: most of a search's time there, whatever the terms.
--
-- The index now holds tenant-qualified terms: each lexeme prefixed by eight hex digits of md5(tenant), so a
-- term's posting list holds only that tenant's rows and a search reads only the lists of its own terms. It
-- is an index on an expression of the row's own columns, so every writer (the indexer's inserts, a copy,
-- a reindex, anything later) fills it; nothing can forget it. The tenant's query is rewritten the same way
-- (`tenant_terms_query`) and the row's own `terms @@ query` and `tenant_id` still decide: a prefix shared by
-- two tenants (1 in 4 billion a pair) or anything else the keys cannot tell apart costs work, never a
-- wrong row.
--
-- The tenant's condition is written so that no index can take it (`IS TRUE`; tenant_id is never NULL): the
-- keys already hold only the tenant's rows (and a prefix shared with another tenant is rare), and the
-- planner otherwise ANDed the keys' bitmap with the tenant's whole posting list in a btree (130k entries,
-- 200 ms in the largest tenant) — the cost this index exists to avoid.
--
-- Keys are lexemes only (no positions): a phrase `a <-> b` asks the index for `a & b` and the row's terms
-- check the order, so the index answers exactly and never re-reads a row to recompute its keys.

-- A lexeme's keys for one tenant: the prefixed lexeme (its md5 when too long for a tsvector with the prefix),
-- split at U+001F, the separator `tenant_terms` joins a row's lexemes with (the tokenizer's lexemes are
-- letters, digits and joiners and never hold it; anything else is keyed the same way in rows and queries).
CREATE FUNCTION indexer.tenant_term_keys(p_prefix text, p_lexeme text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
RETURN array_remove(string_to_array(
    p_prefix || CASE WHEN octet_length(p_lexeme) > 1900 THEN 'md5:' || md5(p_lexeme) ELSE p_lexeme END, E'\x1f'), '');

-- The row's keys: its lexemes, tenant-qualified, without positions. Every insert pays for this, so the
-- common case is one expression of C functions (join the lexemes with separator + prefix, split): a tenth
-- of the cost of keying lexemes one by one, which only rows with more than 1900 bytes of lexemes take.
CREATE FUNCTION indexer.tenant_terms_one_by_one(p_prefix text, p_lexemes text[]) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
RETURN array_to_tsvector(ARRAY(
    SELECT DISTINCT key FROM unnest(p_lexemes) AS lexeme, unnest(indexer.tenant_term_keys(p_prefix, lexeme)) AS key
));

CREATE FUNCTION indexer.tenant_terms(p_tenant uuid, p_terms tsvector) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
RETURN CASE
    WHEN octet_length(array_to_string(tsvector_to_array(p_terms), '')) <= 1900 THEN
        array_to_tsvector(array_remove(string_to_array(
            left(md5(p_tenant::text), 8) || array_to_string(tsvector_to_array(p_terms), E'\x1f' || left(md5(p_tenant::text), 8)),
            E'\x1f'), ''))
    ELSE indexer.tenant_terms_one_by_one(left(md5(p_tenant::text), 8), tsvector_to_array(p_terms))
END;

-- A query over the tenant's keys that every row matching `p_query` matches: each quoted lexeme keyed (a
-- prefix search `:*` stays one, weights go: keys have none), each phrase operator `<->`/`<N>` made `&`.
-- The tokenizer never writes NOT, under which a phrase made `&` would no longer be implied; refused.
CREATE FUNCTION indexer.tenant_terms_query(p_tenant uuid, p_query tsquery) RETURNS tsquery
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT
SET search_path = indexer, pg_temp
AS $$
DECLARE
    prefix text := left(md5(p_tenant::text), 8);
    keyed text := '';
    token text;
    lexeme text;
    keys text[];
BEGIN
    FOR token IN
        SELECT m[1] FROM regexp_matches(p_query::text, $re$('(?:[^']|'')*'(?::[*A-Da-d]+)?|<(?:-|[0-9]+)>|[^'<]+)$re$, 'g') AS m
    LOOP
        IF left(token, 1) = '''' THEN
            -- 'it''s':* → the lexeme it's → its keys, each written with quote and backslash doubled
            lexeme := replace(replace(substring(token FROM '^''((?:[^'']|'''')*)'''), '''''', ''''), '\\', '\');
            keys := ARRAY(SELECT '''' || replace(replace(k, '\', '\\'), '''', '''''') || ''''
                          FROM unnest(tenant_term_keys(prefix, lexeme)) AS k);
            keys[cardinality(keys)] := keys[cardinality(keys)]
                || CASE WHEN substring(token FROM '''(:[*A-Da-d]+)$') LIKE '%*%' THEN ':*' ELSE '' END;
            keyed := keyed || '(' || array_to_string(keys, ' & ') || ')';
        ELSIF left(token, 1) = '<' THEN
            keyed := keyed || '&';
        ELSIF position('!' IN token) > 0 THEN
            RAISE EXCEPTION 'tenant_terms_query: NOT is not supported in %', p_query;
        ELSE
            keyed := keyed || token;
        END IF;
    END LOOP;
    RETURN keyed::tsquery;
END
$$;

DROP INDEX indexer.messages_tenant_terms;
CREATE INDEX messages_tenant_terms ON indexer.messages USING gin (indexer.tenant_terms(tenant_id, terms));

-- Which way to find the most recent p_cap matches: the planner's estimate of the tenant's matches (from the
-- keys' statistics, one cheap EXPLAIN of a one-table query) against the tenant's size. A term in a large
-- share of the tenant's messages (a name, a common word) is found walking the tenant's messages from the
-- newest (0016's (tenant_id, occurred_at) index) until p_cap match: about size·cap/matches rows. Anything
-- rarer is found through the keys: its matches only. The walk costs less when matches² > size·cap. The
-- planner cannot choose between the two itself: the row's own `terms @@ query` (needed: the keys cannot
-- check a phrase, and may share a prefix) is the same condition again, so it multiplies the two
-- selectivities and expects a few hundred matches where there are thirty thousand, and walks no more.
DROP FUNCTION indexer.matching_messages(uuid, tsquery, text, text[], int);
CREATE FUNCTION indexer.matching_messages(p_tenant uuid, p_query tsquery, p_agent text, p_session_keys text[], p_cap int)
RETURNS TABLE (message_id uuid, occurred_at timestamptz, terms tsvector)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- EXPLAIN is refused in a STABLE function
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
#variable_conflict use_column
DECLARE
    keyed tsquery := indexer.tenant_terms_query(p_tenant, p_query);
    plan json;
    matches float8;
    size float8;
BEGIN
    IF p_tenant IS DISTINCT FROM cairn.current_tenant() THEN
        RETURN;
    END IF;
    EXECUTE format('EXPLAIN (FORMAT JSON) SELECT 1 FROM indexer.messages m WHERE indexer.tenant_terms(m.tenant_id, m.terms) @@ %L::tsquery', keyed)
        INTO plan;
    matches := (plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8;
    size := (SELECT coalesce(sum(n.messages), 0) FROM indexer.message_counts n WHERE n.tenant_id = p_tenant);
    IF matches * matches > size * p_cap THEN
        RETURN QUERY
        SELECT m.message_id, m.occurred_at, m.terms
        FROM indexer.messages m
        WHERE m.tenant_id = p_tenant AND m.terms @@ p_query
          AND (p_agent IS NULL OR m.agent_id = p_agent) AND (p_session_keys IS NULL OR m.session_key = ANY(p_session_keys))
        ORDER BY m.occurred_at DESC, m.message_id
        LIMIT p_cap;
    ELSE
        RETURN QUERY
        SELECT m.message_id, m.occurred_at, m.terms
        FROM indexer.messages m
        WHERE (m.tenant_id = p_tenant) IS TRUE AND indexer.tenant_terms(m.tenant_id, m.terms) @@ keyed
          AND m.terms @@ p_query
          AND (p_agent IS NULL OR m.agent_id = p_agent) AND (p_session_keys IS NULL OR m.session_key = ANY(p_session_keys))
        ORDER BY m.occurred_at DESC, m.message_id
        LIMIT p_cap;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION indexer.matching_messages(uuid, tsquery, text, text[], int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.matching_messages(uuid, tsquery, text, text[], int) TO cairn_app;
