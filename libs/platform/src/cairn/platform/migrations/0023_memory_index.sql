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
    first_seq   bigint,
    due_at      timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, session_id)
);
CREATE INDEX memory_pending_due ON indexer.memory_pending (due_at);

-- Read-your-writes for memory search: the highest ingest position the memory consumers have applied, per
-- agent. A position is searchable once this has reached it and no session still waiting for its debounce
-- holds a turn at or before it (`memory_pending.first_seq`).
CREATE TABLE indexer.memory_progress (
    tenant_id  uuid        NOT NULL,
    agent_id   text        NOT NULL,
    ingest_seq bigint      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, agent_id)
);

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
SELECT cairn.isolate_by_tenant('indexer.memory_progress');
SELECT cairn.isolate_by_tenant('indexer.memory_pending');

-- Background work of the indexer, across tenants: sessions whose debounce ran out, and agents whose
-- vectors were made by another model than the configured one (re-embedding). As the owner these functions
-- may list the tenants; they set each tenant in turn, so row-level security still scopes every read.
CREATE FUNCTION indexer.due_memory_sessions(p_limit int)
RETURNS TABLE (tenant_id uuid, agent_id text, session_id uuid)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = indexer, pg_temp AS $$
DECLARE
    t uuid;
BEGIN
    FOR t IN SELECT x.tenant_id FROM ingest.tenants x LOOP
        PERFORM set_config('cairn.tenant_id', t::text, true);
        RETURN QUERY SELECT p.tenant_id, p.agent_id, p.session_id FROM indexer.memory_pending p
            WHERE p.tenant_id = t AND p.due_at <= now() ORDER BY p.due_at LIMIT p_limit;
    END LOOP;
    PERFORM set_config('cairn.tenant_id', '', true);
END
$$;

CREATE FUNCTION indexer.stale_memory_agents(p_model text)
RETURNS TABLE (tenant_id uuid, agent_id text, stale bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = indexer, pg_temp AS $$
DECLARE
    t uuid;
BEGIN
    FOR t IN SELECT x.tenant_id FROM ingest.tenants x LOOP
        PERFORM set_config('cairn.tenant_id', t::text, true);
        RETURN QUERY SELECT c.tenant_id, c.agent_id, count(*) FROM indexer.memory_chunks c
            WHERE c.tenant_id = t AND c.model IS DISTINCT FROM p_model GROUP BY c.tenant_id, c.agent_id;
    END LOOP;
    PERFORM set_config('cairn.tenant_id', '', true);
END
$$;

REVOKE ALL ON FUNCTION indexer.due_memory_sessions(int) FROM PUBLIC;
REVOKE ALL ON FUNCTION indexer.stale_memory_agents(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION indexer.due_memory_sessions(int) TO cairn_app;
GRANT EXECUTE ON FUNCTION indexer.stale_memory_agents(text) TO cairn_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON indexer.memory_chunks, indexer.memory_counts, indexer.memory_turns,
    indexer.memory_pending, indexer.memory_agents, indexer.memory_progress TO cairn_app;
