-- The memory index (indexer): chunks of memory documents and of remembered transcripts, each with a
-- full-text vector from the application tokenizer and, when an embedding provider is configured, an
-- embedding stored with the id of the model that made it.
--
-- `embedding` has no fixed dimension, so a deployment can move from one provider to another; each
-- supported dimension has its own partial HNSW index over the cast column (pgvector's documented way to
-- index mixed dimensions), and a query names the dimension of the model it searches with.
CREATE TABLE indexer.memory_chunks (
    tenant_id    uuid        NOT NULL,
    agent_id     text        NOT NULL,
    chunk_id     uuid        NOT NULL DEFAULT gen_random_uuid(),
    source       text        NOT NULL CHECK (source IN ('memory', 'sessions')),
    path         text,
    version      int,
    session_key  text,
    session_id   uuid,
    start_line   int         NOT NULL,
    end_line     int         NOT NULL,
    text         text        NOT NULL,
    terms        tsvector    NOT NULL,
    content_hash bytea       NOT NULL,
    message_ids  uuid[]      NOT NULL DEFAULT '{}',
    dated        date,
    occurred_at  timestamptz,
    model        text,
    dims         smallint,
    embedding    vector,
    indexed_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, chunk_id),
    CHECK ((source = 'memory') = (path IS NOT NULL)),
    CHECK ((embedding IS NULL) = (model IS NULL) AND (embedding IS NULL) = (dims IS NULL))
);
CREATE INDEX memory_chunks_path ON indexer.memory_chunks (tenant_id, agent_id, path) WHERE path IS NOT NULL;
CREATE INDEX memory_chunks_session ON indexer.memory_chunks (tenant_id, session_id, start_line)
    WHERE session_id IS NOT NULL;
CREATE INDEX memory_chunks_agent ON indexer.memory_chunks (tenant_id, agent_id, source);
CREATE INDEX memory_chunks_terms ON indexer.memory_chunks USING gin (terms);
CREATE INDEX memory_chunks_stale ON indexer.memory_chunks (model);
-- Unchanged text keeps its vector: an edit re-embeds only the chunks whose text changed.
CREATE INDEX memory_chunks_hash ON indexer.memory_chunks (tenant_id, content_hash);
CREATE INDEX memory_chunks_hnsw_384 ON indexer.memory_chunks
    USING hnsw ((embedding::vector(384)) vector_cosine_ops) WHERE dims = 384;
CREATE INDEX memory_chunks_hnsw_512 ON indexer.memory_chunks
    USING hnsw ((embedding::vector(512)) vector_cosine_ops) WHERE dims = 512;
CREATE INDEX memory_chunks_hnsw_768 ON indexer.memory_chunks
    USING hnsw ((embedding::vector(768)) vector_cosine_ops) WHERE dims = 768;
CREATE INDEX memory_chunks_hnsw_1024 ON indexer.memory_chunks
    USING hnsw ((embedding::vector(1024)) vector_cosine_ops) WHERE dims = 1024;
CREATE INDEX memory_chunks_hnsw_1536 ON indexer.memory_chunks
    USING hnsw ((embedding::vector(1536)) vector_cosine_ops) WHERE dims = 1536;

-- Chunks per agent, kept with the rows: the search chooses an exact scan for a small agent and the
-- shared HNSW index (with an iterative scan sized by the agent's share) for a large one.
CREATE TABLE indexer.memory_counts (
    tenant_id uuid   NOT NULL,
    agent_id  text   NOT NULL,
    chunks    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, agent_id)
);

-- The messages of sessions that may be remembered across conversations (direct, persistent, not cron,
-- heartbeat, sub-agent or incognito), redacted: the transcript side of the index is chunked from these.
CREATE TABLE indexer.memory_turns (
    tenant_id   uuid        NOT NULL,
    agent_id    text        NOT NULL,
    session_id  uuid        NOT NULL,
    position    int         NOT NULL,
    reset_index int         NOT NULL,
    session_key text        NOT NULL,
    message_id  uuid        NOT NULL,
    role        text        NOT NULL,
    sender_name text,
    text        text        NOT NULL,
    occurred_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, session_id, position)
);
CREATE UNIQUE INDEX memory_turns_message ON indexer.memory_turns (tenant_id, message_id);

-- Sessions whose new turns wait to be chunked (debounced), and agents' remember settings.
CREATE TABLE indexer.memory_pending (
    tenant_id   uuid        NOT NULL,
    agent_id    text        NOT NULL,
    session_id  uuid        NOT NULL,
    session_key text        NOT NULL,
    first_at    timestamptz NOT NULL DEFAULT now(),
    due_at      timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, session_id)
);
CREATE INDEX memory_pending_due ON indexer.memory_pending (due_at);

CREATE TABLE indexer.memory_agents (
    tenant_id      uuid    NOT NULL,
    agent_id       text    NOT NULL,
    remember       boolean NOT NULL,
    config_version int     NOT NULL,
    PRIMARY KEY (tenant_id, agent_id)
);

SELECT cairn.isolate_by_tenant('indexer.memory_chunks');
SELECT cairn.isolate_by_tenant('indexer.memory_counts');
SELECT cairn.isolate_by_tenant('indexer.memory_turns');
SELECT cairn.isolate_by_tenant('indexer.memory_agents');
-- Not forced: the owner-run function below lists due work across tenants; cairn_app stays bound.
SELECT cairn.isolate_by_tenant('indexer.memory_pending', force => false);
-- Not forced either: the owner-run function below finds which agents hold vectors of another model.
ALTER TABLE indexer.memory_chunks NO FORCE ROW LEVEL SECURITY;

-- Background work of the indexer, across tenants: sessions whose debounce ran out, and agents whose
-- vectors were made by another model than the configured one (re-embedding). The rows themselves are
-- then read and written in tenant transactions, under row-level security.
CREATE FUNCTION indexer.due_memory_sessions(p_limit int)
RETURNS TABLE (tenant_id uuid, agent_id text, session_id uuid)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = indexer, pg_temp AS $$
    SELECT tenant_id, agent_id, session_id FROM indexer.memory_pending
    WHERE due_at <= now() ORDER BY due_at LIMIT p_limit
$$;

CREATE FUNCTION indexer.stale_memory_agents(p_model text)
RETURNS TABLE (tenant_id uuid, agent_id text, stale bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = indexer, pg_temp AS $$
    SELECT tenant_id, agent_id, count(*) FROM indexer.memory_chunks
    WHERE model IS DISTINCT FROM p_model
    GROUP BY tenant_id, agent_id
$$;

REVOKE ALL ON FUNCTION indexer.due_memory_sessions(int) FROM PUBLIC;
REVOKE ALL ON FUNCTION indexer.stale_memory_agents(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.due_memory_sessions(int) TO cairn_app;
GRANT EXECUTE ON FUNCTION indexer.stale_memory_agents(text) TO cairn_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON indexer.memory_chunks, indexer.memory_counts, indexer.memory_turns,
    indexer.memory_pending, indexer.memory_agents TO cairn_app;
