-- The term bits (term_bits) a chunk must hold to match a query: none for queries whose presence alone does not
-- decide.
-- Defined so by migration 0091_memory_term_bits_of_prefixes.
--
-- From that migration's header:
-- Memory search speed (issue 5): a word and its stem share a term bit, so a query's words are required bits.
-- The walk by term bits (0059) checks only the bits of lexemes a match cannot do without. But every English
-- query word is a `(word | stem)` group ('released' -> ('released' | 'releas')), and neither member of a group
-- is required alone: a 10-word conjunction checked the bits of its 2 words without a stem, "released bicycles
-- running" none at all (no walk by bits). Now a lexeme's bit is the hash of its first three characters, which
-- a word and its Snowball stem share (bar a few irregular forms such as 'dying' -> 'die'): the group is one
-- bit, and the query cannot match without it. Counted on the bench's 100k synthetic chunks, the 10-word
-- conjunction: 7 required bits instead of 2, and its walk fetches the 300 matches it answers instead of
-- 3,013 rows. Fewer bits per chunk as well (words sharing a prefix share one): 33 -> 24 for the bench's chunks,
-- 257 -> 182 for chunks of 20 LoCoMo turns, so the bits filter passes fewer of those too. Measured A/B (same
-- rows in two databases, queries alternating; /work/notes/memspeed12.md): matching for 150 LoCoMo questions
-- over 20,000 such chunks, median per-query ratio 0.78, total 0.59; the bench's 10-word queries 0.83-0.87.
--
-- Still exact, whatever the hash: bit b is required only when the query is false for the query's lexemes
-- without every lexeme whose bit is b, and a chunk without bit b has none of them. Phrases (`<->`, `<N>`:
-- quoted phrases, identifiers' parts) now get bits too, decided on the query with each phrase read as the
-- conjunction of its lexemes (which every match of the phrase holds; lexemes without positions never match a
-- phrase itself). NOT, prefixes and weights still get none.
--
-- The column's values change with the function, so the table is rewritten (with its indexes, the HNSW graphs
-- included) under an exclusive lock, once, as with 0059: 140,000 chunks took 6.7 minutes on a loaded 2-core
-- machine, mostly the HNSW rebuild.
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
