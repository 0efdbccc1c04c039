-- The indexer's full-text index of messages (schema indexer): the messages with their terms, per-tenant counts,
-- and index progress.
-- The squash of migrations 0001-0151 (see tests/integration/schema/): today's schema in one file.

CREATE SCHEMA indexer;
GRANT USAGE ON SCHEMA indexer TO cairn_app;

-- No index uses it since the tenant-qualified keys replaced (tenant_id, terms) GIN indexes; databases
-- created before have it, so the baseline keeps it (dropping it is a migration of its own).
CREATE EXTENSION IF NOT EXISTS btree_gin;

-- The row types the indexer sends a batch's searchable messages and remembered turns in: one array of records each
-- instead of fifteen and twelve column arrays, as the session's entries travel since 0132. asyncpg checks every
-- element of an array argument for being a nested array (Python-level ABC checks), so column arrays cost one check
-- per value and an array of records one per row; measured on a 230-row batch, the client's CPU per message row
-- halves and the backend's drops too (one binary record per row instead of fifteen array walks). Types of their
-- own, not the tables' row types, so that a column added to a table leaves the statements as they are; `terms`
-- travels as text and is cast to tsvector in the SELECT, as before. Types are usable by every role.
CREATE TYPE indexer.message_row AS (
	tenant_id uuid,
	agent_id text,
	message_id uuid,
	session_key text,
	session_id uuid,
	"position" integer,
	reset_index integer,
	role text,
	chat_type text,
	text text,
	terms text,
	occurred_at timestamp with time zone,
	ingest_seq bigint,
	external_id text,
	sender_name text
);

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

-- The keys of all a row's lexemes (tenant_terms takes out the implied CJK unigrams first).
CREATE FUNCTION indexer.tenant_lexeme_keys(p_tenant uuid, p_terms tsvector) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
RETURN CASE
    WHEN octet_length(array_to_string(tsvector_to_array(p_terms), '')) <= 1900 THEN
        array_to_tsvector(array_remove(string_to_array(
            left(md5(p_tenant::text), 8) || array_to_string(tsvector_to_array(p_terms), E'\x1f' || left(md5(p_tenant::text), 8)),
            E'\x1f'), ''))
    ELSE indexer.tenant_terms_one_by_one(left(md5(p_tenant::text), 8), tsvector_to_array(p_terms))
END;

CREATE FUNCTION indexer.tenant_terms(p_tenant uuid, p_terms tsvector) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
RETURN indexer.tenant_lexeme_keys(p_tenant, ts_delete(p_terms, tsvector_to_array(ts_filter(p_terms, '{c}'))));

-- Session search at 1M messages (issue 4). BM25 needs the size of the tenant's corpus; counting the tenant's
-- rows on every search cost as much as the matching itself in a large tenant. The count is kept with the
-- rows instead, per agent, by statement triggers: every writer of indexer.messages (the indexer's batch
-- INSERT, a copy, a future erasure) keeps it exact in its own transaction, one upsert per statement.
CREATE TABLE indexer.message_counts (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    messages bigint DEFAULT 0 NOT NULL,
    CONSTRAINT message_counts_pkey PRIMARY KEY (tenant_id, agent_id)
);
SELECT cairn.isolate_by_tenant('indexer.message_counts');

-- Search quality (issue 4): a hit names the adapter's message id (so importers and benchmarks can map
-- hits back to what they sent), and the sender's name is part of what a message is found by.
CREATE TABLE indexer.messages (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    message_id uuid NOT NULL,
    session_key text NOT NULL,
    session_id uuid NOT NULL,
    "position" integer NOT NULL,
    reset_index integer NOT NULL,
    role text NOT NULL,
    chat_type text NOT NULL,
    text text NOT NULL,
    terms tsvector NOT NULL,
    occurred_at timestamp with time zone NOT NULL,
    ingest_seq bigint,
    external_id text,
    sender_name text,
    CONSTRAINT messages_pkey PRIMARY KEY (tenant_id, message_id)
);
-- Full-text matching under row-level security could not use the full-text index: `@@` is not
-- LEAKPROOF (and only a superuser may mark it), so Postgres evaluates it after the tenant policy, as a
-- filter over every row of the tenant. Matching therefore runs in a SECURITY DEFINER function as the
-- owner, for whom indexer.messages is no longer forced, so the (tenant_id, terms) index does the work.
-- Isolation holds: the function answers only for the tenant of the calling transaction
-- (cairn.current_tenant()), and cairn_app still sees the table through the policy everywhere else.
-- Candidates are the most recent `cap` matches, the order every search ranks from.
SELECT cairn.isolate_by_tenant('indexer.messages', force => false);

-- How far the projection has got, per tenant, in ingest-stream sequence (read-your-writes).
-- Read-your-writes per agent: the session service applies each (tenant, agent) partition in order, but
-- different agents of one tenant progress independently, so a tenant-wide high-water mark could pass
-- an agent's write that is not indexed yet.
CREATE TABLE indexer.progress (
    tenant_id uuid NOT NULL,
    ingest_seq bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    agent_id text NOT NULL,
    CONSTRAINT progress_pkey PRIMARY KEY (tenant_id, agent_id)
);
SELECT cairn.isolate_by_tenant('indexer.progress');

GRANT SELECT,INSERT,UPDATE ON TABLE indexer.message_counts TO cairn_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE indexer.messages TO cairn_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE indexer.progress TO cairn_app;

CREATE INDEX messages_session ON indexer.messages USING btree (tenant_id, session_id, "position");

CREATE INDEX messages_tenant_recent ON indexer.messages USING btree (tenant_id, occurred_at DESC, message_id);

-- Ingest throughput (issue 4): the messages' tenant-keyed GIN (0039) takes new rows into a small pending list again
-- (0054 had turned it off), bounded at 256 kB (32 pages) instead of the default 4 MB.
--
-- With fastupdate off every key of every row is its own descent into the GIN: a message has ~34 distinct keys (a CJK
-- run's unigrams and bigrams, tenant-qualified), and that was Postgres's largest cost per ingested message. With a
-- pending list the rows are appended to it, and when it passes the limit the inserting statement merges the whole
-- list into the tree in key order. Backend CPU per message, 200-row INSERTs like the indexer's of the standard
-- bench's messages into a copy of the table (2 cores, load 5.3-5.8), 3 rounds: off 0.24-0.26 ms, 128 kB
-- 0.12-0.21, 256 kB 0.15-0.19, 1 MB 0.11-0.14. The whole pipeline, `cairn bench load --throughput-only` (20k
-- messages, 1000 tenants), off/on interleaved on one stack, 3 pairs at load 4-9.5: Postgres CPU 13.1/10.4,
-- 13.2/10.0, 17.5/11.3 s; end to end 747/1069, 505/897, 698/670 msg/s.
--
-- Why 0054 turned it off still holds for a large list: every search that reads the keys also reads the whole list,
-- whatever its tenant. At 256 kB that is at most 32 pages: 150 searches of 2-4 character fragments on a 22k-message
-- index, list empty vs full (29 pages), 3 rounds at load 4.5-4.7: mean 3.75-4.55 vs 4.12-4.56 ms (1 MB, 110 pages:
-- +0.5-1 ms; 128 kB: no difference seen). The entries are searchable at once either way (the list is read).
CREATE INDEX messages_tenant_terms ON indexer.messages USING gin (indexer.tenant_terms(tenant_id, terms)) WITH (fastupdate='on', gin_pending_list_limit='256');
