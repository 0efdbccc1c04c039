-- The memory index (libs/memindex, which writes these tables; they live in schema indexer, created by the
-- indexer's baseline, which runs before this one): chunks, their keys and vectors, remembered turns, and the
-- bookkeeping of what is due for chunking and re-embedding.
-- The squash of migrations 0001-0151 (see tests/integration/schema/): today's schema in one file.

-- pgvector is not a trusted extension: the database's superuser creates it before the first migration (as a
-- managed service's bootstrap does; locally cairn.local.infra); this only checks that it is there.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TYPE indexer.turn_row AS (
	tenant_id uuid,
	agent_id text,
	session_id uuid,
	"position" integer,
	reset_index integer,
	session_key text,
	message_id uuid,
	role text,
	sender_name text,
	text text,
	occurred_at timestamp with time zone,
	external_id text
);

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
CREATE FUNCTION indexer.lexeme_bit(p_lexeme text) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
RETURN hashtext(left(p_lexeme, 4)) & 511;

CREATE FUNCTION indexer.term_bits(p_terms tsvector) RETURNS bit(512)
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
RETURN (SELECT coalesce(bit_or(set_bit(repeat('0', 512)::bit(512), indexer.lexeme_bit(lexeme), 1)), repeat('0', 512)::bit(512))
        FROM unnest(tsvector_to_array(p_terms)) AS lexeme);

-- Memory search speed (issue 5): the chunks dated on a day a query names are read from an index, not found by
-- reading every chunk of the agent. A question naming a day ("what did Jon find on 1 February, 2023?") adds
-- the chunks dated on it to the candidates (recall's ON_DAYS); its filter, `to_char(…, 'MM-DD')` of the chunk's
-- day, had no index, so Postgres read all of an agent's chunks (heap rows) and kept none: on 100,000 realistic
-- chunks (bench memindex --data locomo) ~0.5-0.8 s of such a search, the whole p99 of memory search
-- (/work/notes/memsearch13.md).
--
-- A chunk's day is its `dated` (a daily note's day), else the UTC day of `occurred_at`: the day recall's Python
-- checks the year on (`on_day`). The old expression cast `dated` to timestamptz in the session's time zone and
-- back to UTC, the same day only while the server's zone is UTC; this one is the day itself in any zone.
-- 'MM-DD' spells no month or weekday name, so to_char here does not depend on the locale: IMMUTABLE is true.
CREATE FUNCTION indexer.memory_month_day(p_dated date, p_occurred_at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN to_char(coalesce(p_dated::timestamp, p_occurred_at AT TIME ZONE 'UTC'), 'MM-DD');

-- A rolling deploy that changes the embedding model runs replicas of both models side by side, and each
-- re-embedded the other's vectors back to its own model until the old replicas were gone (0038 looks for
-- vectors of another model while running). Now every indexer replica claims its model when it starts and
-- again at each look; the model of the most recently started replica still alive is the one the index
-- moves to, and replicas of another model leave re-embedding to it. They keep indexing new text with their
-- own model meanwhile (the target's replicas re-embed it). When the newest replicas are gone (a rollback,
-- or their claims stop being renewed), the remaining model takes over. Cross-tenant operational state: no
-- tenant rows, read and written only through the function.
CREATE TABLE indexer.embedding_models (
    model text NOT NULL,
    started_at timestamp with time zone NOT NULL,
    seen_at timestamp with time zone NOT NULL,
    CONSTRAINT embedding_models_pkey PRIMARY KEY (model)
);

CREATE TABLE indexer.memory_agents (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    remember boolean NOT NULL,
    config_version integer NOT NULL,
    CONSTRAINT memory_agents_pkey PRIMARY KEY (tenant_id, agent_id)
);
-- The memory worker took every due session in a tenant transaction of its own — BEGIN, claim the mark, read the
-- agent's remember setting, delete the mark, COMMIT: five round trips — also when the agent does not remember,
-- whose turns are kept (turning remember on chunks them, 0023) but whose sessions are never chunked. With
-- agents set to one session per channel peer (remember off by default) that was one such transaction for
-- nearly every quiet session: most of the worker's database traffic, for nothing to do.
--
-- The worker's one look for due sessions now also drops the due marks of agents that do not remember (at most
-- 1,000 a call), as the transaction did (same rows deleted, same notification), and lists them as finished; the
-- due sessions of agents that remember are returned to be chunked as before. A mark or setting another
-- transaction holds is skipped: when the call dropped fewer than its bound, such a session is listed as due and
-- the worker's own transaction decides, as before (when it reached the bound, the worker looks again at once).
-- The agent's setting is locked with the mark, so a setting turned on meanwhile is re-read (the statement then
-- leaves the mark alone). An agent with no stored setting remembers (its default config): never dropped here.
--
-- As the owner the function reads the agents' settings of every tenant (as 0042 did for the marks);
-- cairn_app and cairn_projector still see the table only through its policies.
SELECT cairn.isolate_by_tenant('indexer.memory_agents', force => false);

-- Memory search speed (issue 5): the full-text keys' bitmap reads narrow rows, not the chunks themselves.
--
-- The bitmap way (memory_matches_by_bitmap, 0058) read every match's row from memory_chunks to sort the matches by
-- recency and keep the newest `cap`. A chunk of 20 conversation turns keeps 5-7 kB of terms in its row (0090), so a
-- row is a page: a question whose words are common in the agent ("What has Melanie painted?": thousands of the
-- realistic 100k seed's chunks) read thousands of heap pages (781 MB of heap against 128 MB of shared buffers),
-- 100-800 ms under load, for 300 rows. That is most of memory search's tail on the realistic seed
-- (`cairn bench memindex --part search --data ../shared/datasets/locomo`).
--
-- Now each chunk has a row in memory_chunk_keys: what the way filters and sorts by (agent, source, session key,
-- occurred_at) and its lexemes without positions (`strip(terms)`, stored out of line by TOAST: the row is about
-- 90 bytes, 9 MB of heap for 100k chunks). The full-text keys (tenant-qualified, 0039) are indexed there instead of
-- on memory_chunks, so the way reads the GIN, then the narrow rows of every match, sorts them by recency, and only
-- then fetches the chunks by primary key, newest first, until `cap` of them match `terms @@ query` (the row's own
-- terms still decide: a phrase `a <-> b` is `a & b` for the keys). Same rows (the most recent `cap` matches), same
-- signature and grants. Measured on the realistic 100k seed, 2 cores at load 4.7-6.7:
-- the way alone against a copy of the table of narrow rows, interleaved, 2 rounds of the bench's 161 distinct
-- questions: at the cap (170 calls) mean 94.6 -> 23.8 ms, median per-call ratio 0.36, all calls p99 543 -> 70 ms;
-- the whole lexical statement (LEXICAL_ROWS, dispatcher 0124 unchanged), old way B against this one A, AB/BA
-- alternating, 2 rounds of the 200 questions: p50 41.6 -> 38.9, p99 151.0 -> 112.6, mean 49.9 -> 42.2 ms,
-- median per-query ratio 0.94, identical ids and scores 400/400.
--
-- The rows are kept by statement triggers on memory_chunks (inserted, deleted: one statement each, with the
-- transition tables) and a row trigger for an update of a column it copies (not for a re-embedding). The functions
-- run as the owner: the service roles never read or write the table. Storage: the keys' TOAST is about the size of
-- the terms (~650 MB at 100k realistic chunks); the GIN over dense narrow rows is 57 MB against 133 MB over the chunks.
CREATE TABLE indexer.memory_chunk_keys (
    tenant_id uuid NOT NULL,
    chunk_id uuid NOT NULL,
    agent_id text NOT NULL,
    source text NOT NULL,
    session_key text,
    occurred_at timestamp with time zone,
    lexemes tsvector NOT NULL,
    CONSTRAINT memory_chunk_keys_pkey PRIMARY KEY (tenant_id, chunk_id)
);
SELECT cairn.isolate_by_tenant('indexer.memory_chunk_keys', force => false);

-- The memory index (indexer): chunks of memory documents and of remembered transcripts, each with a
-- full-text vector from the application tokenizer and, when an embedding provider is configured, an
-- embedding stored with the id of the model that made it.
--
-- `embedding` has no fixed dimension, so a deployment can move from one provider to another; each
-- supported dimension has its own partial HNSW index over the cast column (pgvector's documented way to
-- index mixed dimensions), and a query names the dimension of the model it searches with.
CREATE TABLE indexer.memory_chunks (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    chunk_id uuid DEFAULT gen_random_uuid() NOT NULL,
    source text NOT NULL,
    path text,
    version integer,
    session_key text,
    session_id uuid,
    start_line integer NOT NULL,
    end_line integer NOT NULL,
    text text NOT NULL,
    terms tsvector NOT NULL,
    content_hash bytea NOT NULL,
    message_ids uuid[] DEFAULT '{}'::uuid[] NOT NULL,
    dated date,
    occurred_at timestamp with time zone,
    model text,
    dims smallint,
    embedding public.vector,
    indexed_at timestamp with time zone DEFAULT now() NOT NULL,
    external_ids text[] DEFAULT '{}'::text[] NOT NULL,
    term_bits bit(512) GENERATED ALWAYS AS (indexer.term_bits(terms)) STORED,
    CONSTRAINT memory_chunks_check CHECK (((source = 'memory'::text) = (path IS NOT NULL))),
    CONSTRAINT memory_chunks_check1 CHECK ((((embedding IS NULL) = (model IS NULL)) AND ((embedding IS NULL) = (dims IS NULL)))),
    CONSTRAINT memory_chunks_source_check CHECK ((source = ANY (ARRAY['memory'::text, 'sessions'::text]))),
    CONSTRAINT memory_chunks_pkey PRIMARY KEY (tenant_id, chunk_id)
);
-- Memory search speed (issue 5): a chunk's lexemes (`terms`) are kept in its row, not in the TOAST table.
-- A ~400-token chunk's tsvector (lexemes with positions) is 3-6 kB: over the 2 kB at which Postgres moves a
-- row's large values out. Under the column's default (EXTENDED) it tries pglz first, which cannot shrink a
-- tsvector by the 25% it asks (lz4 is not built into this Postgres), so every such chunk kept its terms
-- uncompressed in the TOAST table, and every use read them back from there (a TOAST index probe and two or
-- three chunk rows, copied together): the matching walk's `terms @@ query` per chunk visited, the rank, the
-- candidates' details. MAIN keeps them in the row (moved out only if the row would not fit a page otherwise);
-- the chunk's text still goes out first (read only for the few results). Same values, so the same answers.
-- Measured on 20,000 chunks of 20 LoCoMo turns, the lexical statement per query: median ratio 0.68-0.74
-- (same rows, 150 of 150 queries; /work/notes/memspeed11.md). Short chunks (under 2 kB a row) are unchanged.
--
-- Rows written before this setting (0090) keep their terms in the TOAST table until rewritten; a maintenance
-- window may move them all with `VACUUM FULL indexer.memory_chunks` (an exclusive lock: minutes per million chunks).
ALTER TABLE indexer.memory_chunks ALTER COLUMN terms SET STORAGE MAIN;
-- Not forced (0031): under row-level security `terms @@ q` could never use a full-text index (`@@` is not
-- LEAKPROOF, and only a superuser may mark it), so Postgres evaluated it after the tenant policy, over every chunk of
-- the tenant. Matching runs in SECURITY DEFINER functions as the owner (matching_memory_chunks), which answer only
-- for the tenant of the calling transaction (cairn.current_tenant()); cairn_app sees the table through the policy.
SELECT cairn.isolate_by_tenant('indexer.memory_chunks', force => false);

-- Chunks per agent, kept with the rows: the search chooses an exact scan for a small agent and the
-- shared HNSW index (with an iterative scan sized by the agent's share) for a large one.
CREATE TABLE indexer.memory_counts (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    chunks bigint DEFAULT 0 NOT NULL,
    CONSTRAINT memory_counts_pkey PRIMARY KEY (tenant_id, agent_id)
);
SELECT cairn.isolate_by_tenant('indexer.memory_counts');

-- Sessions whose new turns wait to be chunked (debounced), and agents' remember settings.
CREATE TABLE indexer.memory_pending (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    session_id uuid NOT NULL,
    session_key text NOT NULL,
    first_at timestamp with time zone DEFAULT now() NOT NULL,
    first_seq bigint,
    due_at timestamp with time zone NOT NULL,
    CONSTRAINT memory_pending_pkey PRIMARY KEY (tenant_id, session_id)
);
-- The memory worker looks for due sessions every second (issue 5's debounce). The function set each tenant
-- in turn and probed its pending rows: one query per tenant, ~250 ms of database CPU per look at 1,000
-- tenants, whether or not anything was due, growing with the tenant count. It now reads the (due_at) index
-- once, as the owner, for whom indexer.memory_pending is no longer forced (as 0017/0031 did for matching):
-- the most overdue sessions first, at most p_limit in all (it was p_limit per tenant; the worker asks again
-- while it finds work). cairn_app and cairn_projector still see the table only through its policies.
SELECT cairn.isolate_by_tenant('indexer.memory_pending', force => false);

-- Read-your-writes for memory search: the highest ingest position the memory consumers have applied, per
-- agent. A position is searchable once this has reached it and no session still waiting for its debounce
-- holds a turn at or before it (`memory_pending.first_seq`).
CREATE TABLE indexer.memory_progress (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    ingest_seq bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT memory_progress_pkey PRIMARY KEY (tenant_id, agent_id)
);
SELECT cairn.isolate_by_tenant('indexer.memory_progress');

-- The messages of sessions that may be remembered across conversations (direct, persistent, not cron,
-- heartbeat, sub-agent or incognito), redacted: the transcript side of the index is chunked from these.
-- Transcript chunks also name their messages by the adapter's ids (what a client sent as message_id), in
-- the order of `message_ids`, so a client can map a hit back to its own records without another lookup.
-- Each remembered turn also gets a vector of its own (no index: it is read by id only). A chunk of a
-- conversation averages twenty turns; the turn's own vector tells which of them a search is about, so
-- hits can list their most relevant messages first and score a chunk by its best turn too.
CREATE TABLE indexer.memory_turns (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    session_id uuid NOT NULL,
    "position" integer NOT NULL,
    reset_index integer NOT NULL,
    session_key text NOT NULL,
    message_id uuid NOT NULL,
    role text NOT NULL,
    sender_name text,
    text text NOT NULL,
    occurred_at timestamp with time zone NOT NULL,
    external_id text,
    model text,
    embedding public.vector,
    CONSTRAINT memory_turns_pkey PRIMARY KEY (tenant_id, session_id, "position")
);
-- The memory worker looks for vectors of another model every `reembed_check_s` (0038): chunks in one query,
-- but turns tenant by tenant, one probe per tenant (~250 ms of database CPU per look at 1,000 tenants,
-- growing with the tenant count, whether or not anything is stale). Turns are now read in one query over a
-- (model) index, as chunks are, by the owner, for whom indexer.memory_turns is no longer forced (as 0042 did
-- for memory_pending). cairn_app and cairn_projector still see the table only through its policies.
SELECT cairn.isolate_by_tenant('indexer.memory_turns', force => false);

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE indexer.memory_agents TO cairn_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE indexer.memory_chunks TO cairn_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE indexer.memory_counts TO cairn_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE indexer.memory_pending TO cairn_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE indexer.memory_progress TO cairn_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE indexer.memory_turns TO cairn_app;

-- Memory search speed (issue 5): the chunk GIN index takes each insert into its main structure
-- (fastupdate = off) instead of a pending list. With the default, new chunks wait in an unsorted pending list
-- (up to gin_pending_list_limit, 4 MB) until a vacuum or a full list merges them, and every search that uses
-- the index reads and checks that whole list: the indexer writes chunks all day, so searches kept paying for
-- it. Chunks are written a few at a time (a document edit, a debounced conversation), so the insert cost is
-- small; searches are the hot path. What is pending now is merged here.
CREATE INDEX memory_chunk_keys_terms ON indexer.memory_chunk_keys USING gin (indexer.tenant_terms(tenant_id, lexemes)) WITH (fastupdate=off);

CREATE INDEX memory_chunks_agent ON indexer.memory_chunks USING btree (tenant_id, agent_id, source);

-- Unchanged text keeps its vector: an edit re-embeds only the chunks whose text changed.
CREATE INDEX memory_chunks_hash ON indexer.memory_chunks USING btree (tenant_id, content_hash);

CREATE INDEX memory_chunks_hnsw_1024 ON indexer.memory_chunks USING hnsw (((embedding)::public.vector(1024)) public.vector_cosine_ops) WHERE (dims = 1024);

CREATE INDEX memory_chunks_hnsw_1536 ON indexer.memory_chunks USING hnsw (((embedding)::public.vector(1536)) public.vector_cosine_ops) WHERE (dims = 1536);

CREATE INDEX memory_chunks_hnsw_384 ON indexer.memory_chunks USING hnsw (((embedding)::public.vector(384)) public.vector_cosine_ops) WHERE (dims = 384);

CREATE INDEX memory_chunks_hnsw_512 ON indexer.memory_chunks USING hnsw (((embedding)::public.vector(512)) public.vector_cosine_ops) WHERE (dims = 512);

CREATE INDEX memory_chunks_hnsw_768 ON indexer.memory_chunks USING hnsw (((embedding)::public.vector(768)) public.vector_cosine_ops) WHERE (dims = 768);

-- Read by (tenant, agent, day), in the statement's order within a day: built once (seconds per 100,000 chunks).
CREATE INDEX memory_chunks_month_day ON indexer.memory_chunks USING btree (tenant_id, agent_id, indexer.memory_month_day(dated, occurred_at), occurred_at, start_line);

CREATE INDEX memory_chunks_path ON indexer.memory_chunks USING btree (tenant_id, agent_id, path) WHERE (path IS NOT NULL);

CREATE INDEX memory_chunks_recent ON indexer.memory_chunks USING btree (tenant_id, agent_id, occurred_at DESC NULLS LAST, chunk_id) INCLUDE (source, session_key, term_bits);

CREATE INDEX memory_chunks_session ON indexer.memory_chunks USING btree (tenant_id, session_id, start_line) WHERE (session_id IS NOT NULL);

CREATE INDEX memory_chunks_stale ON indexer.memory_chunks USING btree (model);

-- GET /v1/memory/status counts an agent's chunks by source, its documents (distinct paths), the chunks without a
-- vector of the current model and the last indexing time (recall's STATUS_CHUNKS). Without an index holding those
-- columns it read every chunk row of the agent (wide rows: text, terms, a 512-d vector) and sorted the paths: for an
-- agent of 100k chunks 7.4-14.9 s (7.8 s through the API after a restart). A covering index in path order answers it
-- by an index-only scan already sorted for count(DISTINCT path): 29-50 ms on the same 100k, 0.05-0.11 s through the
-- API. It also serves every (tenant, agent, path) lookup memory_chunks_path served; that one is kept (partial, smaller).
CREATE INDEX memory_chunks_status ON indexer.memory_chunks USING btree (tenant_id, agent_id, path) INCLUDE (source, model, indexed_at);

CREATE INDEX memory_pending_due ON indexer.memory_pending USING btree (due_at);

CREATE UNIQUE INDEX memory_turns_message ON indexer.memory_turns USING btree (tenant_id, message_id);

-- Re-embedding after a model change (issue 5) is looked for while the indexer runs, not only at its start,
-- so the look must be cheap when nothing is stale. Chunks: indexer.memory_chunks is not forced for its
-- owner (0031), so one query over the (model) index finds every agent with chunks of another model or
-- none (`model <> p` cannot use a btree; `< p OR > p` can). Turns (their own vectors, 0024) stay forced,
-- so they are looked for tenant by tenant, each one probe of (tenant_id, model); a turn without a model
-- is not chunked yet and gets its vector then.
CREATE INDEX memory_turns_model ON indexer.memory_turns USING btree (tenant_id, model) WHERE (model IS NOT NULL);

CREATE INDEX memory_turns_stale ON indexer.memory_turns USING btree (model) WHERE (model IS NOT NULL);
