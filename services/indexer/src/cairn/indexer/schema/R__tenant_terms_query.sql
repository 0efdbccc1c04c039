-- A search's tsquery rewritten to the tenant-qualified keys of indexer.messages (see tenant_terms in the baseline).
-- Defined so by migration 0142_search_keys_without_implied_unigrams.
--
-- 0039's rewrite, with a one-character CJK lexeme asked as a prefix.
CREATE OR REPLACE FUNCTION indexer.tenant_terms_query(p_tenant uuid, p_query tsquery) RETURNS tsquery
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
                || CASE WHEN substring(token FROM '''(:[*A-Da-d]+)$') LIKE '%*%'
                          OR (char_length(lexeme) = 1 AND ascii(lexeme) >= 4352) THEN ':*' ELSE '' END;
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
