-- Memory search speed (issue 5): a lexeme's term bit is the hash of its first four characters, not three (0091).
-- Three-letter prefixes are shared by too many words of real text ('con', 'rec', 'cha', 'pro'): a chunk of 20
-- LoCoMo turns sets their bits whatever it is about, so a question whose words start that way passed most chunks
-- to the walk by bits. Counted over 20,000 such chunks and 130 LoCoMo questions (rows fetched to find each one's
-- 300 newest matches; /work/notes/memspeed12.md): whole lexemes (before 0091) 933,022 rows, p50 5,271 a query;
-- 3 characters 452,470, p50 1,810; 4 characters 356,512, p50 1,097 (5: 347,296, p50 1,246). Chunks set 203 of
-- 512 bits (182 with 3). A word and its Snowball stem still share their first four characters when the stem has
-- four or more ('releas', 'allergi', 'danc'); a group whose stem is shorter ('running' | 'run') gets no bit, which
-- only means it is not checked (still exact: see 0091). Measured A/B of the matching (same rows in two databases,
-- queries alternating): 150 LoCoMo questions, total time 0.79-0.88 of 0091's (median per query 0.96-0.99, p99
-- 359 -> 258 ms at load ~6), against before 0091 0.49 (median 0.79); the bench's synthetic queries 0.85 (10
-- words: median 0.89). Which queries win is partly luck: a query word whose bit collides with a word every long
-- chunk holds checks nothing, with any key; a wider bitmap would make that rarer.
--
-- Rewrites the table again (term_bits SET EXPRESSION), like 0091.

CREATE OR REPLACE FUNCTION indexer.lexeme_bit(p_lexeme text) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
RETURN hashtext(left(p_lexeme, 4)) & 511;

ALTER TABLE indexer.memory_chunks ALTER COLUMN term_bits SET EXPRESSION AS (indexer.term_bits(terms));
