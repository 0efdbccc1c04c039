-- Ingest throughput (issue 4): the messages' tenant-keyed GIN (0039) leaves out a CJK character's key when the row
-- has a key starting with it. A message had ~34 distinct keys, a CJK run's unigrams and bigrams; the unigram X of
-- a run's X followed by Y is implied by the bigram XY (every row with the key XY has X): in the standard bench's
-- 20k messages 175,286 of 679,557 keys (26 %).
--
-- The tokenizer says which: a message's vector weights C every position of a CJK character that starts a bigram of
-- the message (`message_vector`; weights meant nothing to message search: the ranking sets its own, 0053). The row's
-- keys are those of its lexemes without the ones weighted C (`ts_delete` of `ts_filter`: C functions, no cost
-- measured next to the old expression; a lexeme without positions has no weight and stays). A query asks a
-- lexeme of one CJK character (code point from U+1100) as a prefix of the tenant's keys, `key:*`: the GIN's
-- partial match reads the tenant's keys starting with it, the character's own key if the row kept it, or its
-- bigrams. The index stays a superset filter; the row's own `terms @@ query` and tenant still decide.
--
-- Cost: backend CPU of 200-row INSERTs of the bench's 20k messages into copies of the table with 100k rows already
-- indexed (256 kB pending list, as 0136), 6 interleaved rounds at load 11-12: median 0.121 -> 0.110 ms per message
-- (lower in 5 of 6); the keys alone (same expression, vectors without the implied unigrams) 0.110 -> 0.090 at load
-- 6.6-8. A regexp dropping them from the joined lexemes inside the expression cost more than it saved (+0.012 ms).
--
-- Existing rows: no writer weighted a message's lexeme C before, so every existing row's keys are unchanged and
-- the index needs no rebuild; it is rebuilt below only if some row says otherwise. The memory keys (0135) are
-- stripped lexemes: unchanged too.

-- 0039's keys of a row's lexemes, under a new name.
CREATE FUNCTION indexer.tenant_lexeme_keys(p_tenant uuid, p_terms tsvector) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
RETURN CASE
    WHEN octet_length(array_to_string(tsvector_to_array(p_terms), '')) <= 1900 THEN
        array_to_tsvector(array_remove(string_to_array(
            left(md5(p_tenant::text), 8) || array_to_string(tsvector_to_array(p_terms), E'\x1f' || left(md5(p_tenant::text), 8)),
            E'\x1f'), ''))
    ELSE indexer.tenant_terms_one_by_one(left(md5(p_tenant::text), 8), tsvector_to_array(p_terms))
END;

CREATE OR REPLACE FUNCTION indexer.tenant_terms(p_tenant uuid, p_terms tsvector) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
RETURN indexer.tenant_lexeme_keys(p_tenant, ts_delete(p_terms, tsvector_to_array(ts_filter(p_terms, '{c}'))));

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

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM indexer.messages WHERE ts_filter(terms, '{c}') <> ''::tsvector) THEN
        REINDEX INDEX indexer.messages_tenant_terms;
    END IF;
END
$$;
