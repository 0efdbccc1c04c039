CREATE OR REPLACE FUNCTION indexer.required_term_bits(p_query tsquery) RETURNS bit(512)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT
SET search_path = indexer, pg_temp
AS $$
DECLARE
    none CONSTANT bit(512) := repeat('0', 512)::bit(512);
    required bit(512) := repeat('0', 512)::bit(512);
    lexemes text[];
    present tsquery;  -- the query with its phrases as conjunctions: what lexemes without positions can match
    bit_of int;
BEGIN
    IF p_query::text ~ '!|'':[A-Da-d*]' THEN  -- NOT, prefixes, weights
        RETURN none;
    END IF;
    lexemes := ARRAY(SELECT DISTINCT replace(replace(m[1], '''''', ''''), '\\', '\')  -- as written: '' and \\ doubled
                     FROM regexp_matches(p_query::text, $re$'((?:[^']|'')*)'$re$, 'g') AS m);
    IF cardinality(lexemes) = 0 OR array_to_string(lexemes, ' ') ~ '<' THEN
        RETURN none;
    END IF;
    -- A phrase operator binds tighter than & and |, so its operands are printed in parentheses when they need
    -- them: `'a' <-> 'b' | 'c'` becomes `'a' & 'b' | 'c'`, every match of the phrase a match of the conjunction.
    present := regexp_replace(p_query::text, '<(-|[0-9]+)>', '&', 'g')::tsquery;
    IF NOT array_to_tsvector(lexemes) @@ present THEN
        RETURN none;
    END IF;
    FOR bit_of IN SELECT DISTINCT indexer.lexeme_bit(lexeme) FROM unnest(lexemes) AS lexeme LOOP
        IF NOT array_to_tsvector(ARRAY(SELECT lexeme FROM unnest(lexemes) AS lexeme
                                       WHERE indexer.lexeme_bit(lexeme) <> bit_of)) @@ present THEN
            required := required | set_bit(none, bit_of, 1);
        END IF;
    END LOOP;
    RETURN required;
END
$$;
