-- Memory records: dated facts distilled from conversations, deduplicated and superseded by the memory writer
-- and rendered into the bank files. Bi-temporal: `valid_from`/`valid_until` is when the fact holds in the
-- world (from the conversation's occurred_at), `recorded_at`/`retired_at` when cairn knew it as current.
-- A superseded or retired record is never deleted: it is the history that `as_of` reads.
CREATE TABLE consolidation.records (
    tenant_id uuid NOT NULL,
    record_id uuid NOT NULL,
    agent_id text NOT NULL,
    kind text NOT NULL,
    entity text NOT NULL,
    relation text NOT NULL,
    text text NOT NULL,
    original text NOT NULL,
    language text NOT NULL,
    importance real NOT NULL,
    content_hash text NOT NULL,
    explicit boolean DEFAULT false NOT NULL,
    pinned boolean DEFAULT false NOT NULL,
    valid_from timestamp with time zone NOT NULL,
    valid_until timestamp with time zone,
    recorded_at timestamp with time zone DEFAULT now() NOT NULL,
    retired_at timestamp with time zone,
    retired_reason text,
    superseded_by uuid,
    -- 'judgement': a grey-zone neighbour (cosine 0.7-0.92) that a model should judge; none was configured
    pending text,
    session_key text,
    session_id text,
    message_ids text[] DEFAULT '{}'::text[] NOT NULL,
    origin text NOT NULL,
    -- ids of requests and candidates merged into this record as duplicates (GET /v1/memory/records/{id} finds them)
    merged_ids uuid[] DEFAULT '{}'::uuid[] NOT NULL,
    bank_path text NOT NULL,
    bank_line integer,
    rendered text,
    embedding public.vector,
    embedding_model text,
    CONSTRAINT records_kind_check CHECK ((kind = ANY (ARRAY['profile'::text, 'preference'::text, 'event'::text, 'plan'::text, 'lesson'::text, 'project'::text]))),
    CONSTRAINT records_origin_check CHECK ((origin = ANY (ARRAY['owner'::text, 'agent'::text, 'untrusted'::text, 'system'::text]))),
    CONSTRAINT records_importance_check CHECK (((importance >= (0)::double precision) AND (importance <= (1)::double precision))),
    CONSTRAINT records_pkey PRIMARY KEY (tenant_id, record_id)
);
SELECT cairn.isolate_by_tenant('consolidation.records');

GRANT SELECT,INSERT,UPDATE ON TABLE consolidation.records TO cairn_app;

-- The agent's current records by hash (the no-op check) and by slot (supersede); history is read by agent.
CREATE INDEX records_current_hash ON consolidation.records USING btree (tenant_id, agent_id, content_hash) WHERE (retired_at IS NULL);
CREATE INDEX records_current_slot ON consolidation.records USING btree (tenant_id, agent_id, entity, relation) WHERE (retired_at IS NULL);
CREATE INDEX records_agent_valid ON consolidation.records USING btree (tenant_id, agent_id, valid_from);
CREATE INDEX records_merged ON consolidation.records USING gin (merged_ids);

-- What became of each explicit record request, at its ingest position: read-your-writes for the records API.
CREATE TABLE consolidation.record_requests (
    tenant_id uuid NOT NULL,
    request_id uuid NOT NULL,
    agent_id text NOT NULL,
    ingest_seq bigint NOT NULL,
    record_id uuid NOT NULL,
    outcome text NOT NULL,
    decided_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT record_requests_pkey PRIMARY KEY (tenant_id, request_id)
);
SELECT cairn.isolate_by_tenant('consolidation.record_requests');

GRANT SELECT,INSERT ON TABLE consolidation.record_requests TO cairn_app;

CREATE INDEX record_requests_position ON consolidation.record_requests USING btree (tenant_id, agent_id, ingest_seq);
