-- - ACL SCHEMA cairn
GRANT USAGE ON SCHEMA cairn TO cairn_app;

-- - ACL SCHEMA consolidation
GRANT USAGE ON SCHEMA consolidation TO cairn_app;

-- - ACL SCHEMA indexer
GRANT USAGE ON SCHEMA indexer TO cairn_app;

-- - ACL SCHEMA ingest
GRANT USAGE ON SCHEMA ingest TO cairn_app;

-- - ACL SCHEMA recall
GRANT USAGE ON SCHEMA recall TO cairn_app;

-- - ACL SCHEMA session
GRANT USAGE ON SCHEMA session TO cairn_app;

-- - COMMENT EXTENSION btree_gin
COMMENT ON EXTENSION btree_gin IS 'support for indexing common datatypes in GIN';

-- - COMMENT EXTENSION vector
COMMENT ON EXTENSION vector IS 'vector data type and ivfflat and hnsw access methods';

-- - EXTENSION btree_gin
CREATE EXTENSION IF NOT EXISTS btree_gin WITH SCHEMA public;

-- - EXTENSION vector
CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public;

-- - SCHEMA cairn
CREATE SCHEMA cairn;

-- - SCHEMA consolidation
CREATE SCHEMA consolidation;

-- - SCHEMA indexer
CREATE SCHEMA indexer;

-- - SCHEMA ingest
CREATE SCHEMA ingest;

-- - SCHEMA recall
CREATE SCHEMA recall;

-- - SCHEMA session
CREATE SCHEMA session;

-- cairn ACL FUNCTION all_tenant_limits()
REVOKE ALL ON FUNCTION cairn.all_tenant_limits() FROM PUBLIC;
GRANT ALL ON FUNCTION cairn.all_tenant_limits() TO cairn_app;

-- cairn ACL FUNCTION batch_tenants()
GRANT ALL ON FUNCTION cairn.batch_tenants() TO cairn_app;

-- cairn ACL FUNCTION current_tenant()
GRANT ALL ON FUNCTION cairn.current_tenant() TO cairn_app;

-- cairn ACL FUNCTION forget_processed(p_consumer text, p_before timestamp with time zone, p_limit integer)
REVOKE ALL ON FUNCTION cairn.forget_processed(p_consumer text, p_before timestamp with time zone, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION cairn.forget_processed(p_consumer text, p_before timestamp with time zone, p_limit integer) TO cairn_app;

-- cairn ACL TABLE model_usage
GRANT SELECT,INSERT,UPDATE ON TABLE cairn.model_usage TO cairn_app;

-- cairn ACL TABLE outbox
GRANT SELECT,INSERT,DELETE ON TABLE cairn.outbox TO cairn_app;

-- cairn ACL TABLE processed_events
GRANT SELECT,INSERT,DELETE ON TABLE cairn.processed_events TO cairn_app;

-- cairn ACL TABLE tenant_limits
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE cairn.tenant_limits TO cairn_app;

-- cairn ACL TABLE tenant_models
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE cairn.tenant_models TO cairn_app;

-- cairn CONSTRAINT model_usage model_usage_pkey
ALTER TABLE ONLY cairn.model_usage
    ADD CONSTRAINT model_usage_pkey PRIMARY KEY (tenant_id, day, purpose, model);

-- cairn CONSTRAINT outbox outbox_pkey
ALTER TABLE ONLY cairn.outbox
    ADD CONSTRAINT outbox_pkey PRIMARY KEY (consumer, causation_id, seq);

-- cairn CONSTRAINT processed_events processed_events_pkey
ALTER TABLE ONLY cairn.processed_events
    ADD CONSTRAINT processed_events_pkey PRIMARY KEY (consumer, event_id);

-- cairn CONSTRAINT tenant_limits tenant_limits_pkey
ALTER TABLE ONLY cairn.tenant_limits
    ADD CONSTRAINT tenant_limits_pkey PRIMARY KEY (tenant_id);

-- cairn CONSTRAINT tenant_models tenant_models_pkey
ALTER TABLE ONLY cairn.tenant_models
    ADD CONSTRAINT tenant_models_pkey PRIMARY KEY (tenant_id);

-- cairn FUNCTION admit_tenant_batches(regclass)
CREATE FUNCTION cairn.admit_tenant_batches(tbl regclass) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    EXECUTE format('CREATE POLICY tenant_batch ON %s TO cairn_projector '
                   'USING (tenant_id = ANY((SELECT cairn.batch_tenants())::uuid[])) '
                   'WITH CHECK (tenant_id = ANY((SELECT cairn.batch_tenants())::uuid[]))', tbl);
END
$$;

-- cairn FUNCTION all_tenant_limits()
CREATE FUNCTION cairn.all_tenant_limits() RETURNS TABLE(tenant_id uuid, limits jsonb)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'cairn'
    AS $$
    SELECT tenant_id, limits FROM cairn.tenant_limits
$$;

-- cairn FUNCTION batch_tenants()
CREATE FUNCTION cairn.batch_tenants() RETURNS uuid[]
    LANGUAGE sql STABLE
    AS $$ SELECT string_to_array(nullif(current_setting('cairn.tenant_ids', true), ''), ',')::uuid[] $$;

-- cairn FUNCTION current_tenant()
CREATE FUNCTION cairn.current_tenant() RETURNS uuid
    LANGUAGE sql STABLE
    AS $$ SELECT nullif(current_setting('cairn.tenant_id', true), '')::uuid $$;

-- cairn FUNCTION forget_processed(text, timestamp with time zone, integer)
CREATE FUNCTION cairn.forget_processed(p_consumer text, p_before timestamp with time zone, p_limit integer) RETURNS integer
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'cairn'
    AS $$
    WITH old AS (
        SELECT event_id FROM cairn.processed_events
        WHERE consumer = p_consumer AND processed_at < p_before
        LIMIT p_limit
    ), outbox_gone AS (
        DELETE FROM cairn.outbox o USING old WHERE o.consumer = p_consumer AND o.causation_id = old.event_id
    ), gone AS (
        DELETE FROM cairn.processed_events p USING old WHERE p.consumer = p_consumer AND p.event_id = old.event_id
        RETURNING 1
    )
    SELECT count(*)::int FROM gone
$$;

-- cairn FUNCTION isolate_by_tenant(regclass, boolean)
CREATE FUNCTION cairn.isolate_by_tenant(tbl regclass, force boolean DEFAULT true) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', tbl);
    IF force THEN
        EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', tbl);
    END IF;
    EXECUTE format('CREATE POLICY tenant_isolation ON %s USING (tenant_id = cairn.current_tenant()) '
                   'WITH CHECK (tenant_id = cairn.current_tenant())', tbl);
    IF (SELECT relnamespace::regnamespace::text FROM pg_class WHERE oid = tbl) IN ('cairn', 'session', 'indexer') THEN
        PERFORM cairn.admit_tenant_batches(tbl);
    END IF;
END
$$;

-- cairn INDEX processed_events_by_age
CREATE INDEX processed_events_by_age ON cairn.processed_events USING brin (processed_at);

-- cairn POLICY model_usage tenant_batch
CREATE POLICY tenant_batch ON cairn.model_usage TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- cairn POLICY model_usage tenant_isolation
CREATE POLICY tenant_isolation ON cairn.model_usage USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- cairn POLICY outbox delete_old_records
CREATE POLICY delete_old_records ON cairn.outbox FOR DELETE TO cairn_owner USING ((created_at < (now() - '01:00:00'::interval)));

-- cairn POLICY outbox sweep_old_records
CREATE POLICY sweep_old_records ON cairn.outbox FOR SELECT TO cairn_owner USING ((created_at < (now() - '01:00:00'::interval)));

-- cairn POLICY outbox tenant_batch
CREATE POLICY tenant_batch ON cairn.outbox TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- cairn POLICY outbox tenant_isolation
CREATE POLICY tenant_isolation ON cairn.outbox USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- cairn POLICY processed_events delete_old_records
CREATE POLICY delete_old_records ON cairn.processed_events FOR DELETE TO cairn_owner USING ((processed_at < (now() - '01:00:00'::interval)));

-- cairn POLICY processed_events sweep_old_records
CREATE POLICY sweep_old_records ON cairn.processed_events FOR SELECT TO cairn_owner USING ((processed_at < (now() - '01:00:00'::interval)));

-- cairn POLICY processed_events tenant_batch
CREATE POLICY tenant_batch ON cairn.processed_events TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- cairn POLICY processed_events tenant_isolation
CREATE POLICY tenant_isolation ON cairn.processed_events USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- cairn POLICY tenant_limits tenant_batch
CREATE POLICY tenant_batch ON cairn.tenant_limits TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- cairn POLICY tenant_limits tenant_isolation
CREATE POLICY tenant_isolation ON cairn.tenant_limits USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- cairn POLICY tenant_models tenant_batch
CREATE POLICY tenant_batch ON cairn.tenant_models TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- cairn POLICY tenant_models tenant_isolation
CREATE POLICY tenant_isolation ON cairn.tenant_models USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- cairn ROW SECURITY model_usage
ALTER TABLE cairn.model_usage ENABLE ROW LEVEL SECURITY;

-- cairn ROW SECURITY outbox
ALTER TABLE cairn.outbox ENABLE ROW LEVEL SECURITY;

-- cairn ROW SECURITY processed_events
ALTER TABLE cairn.processed_events ENABLE ROW LEVEL SECURITY;

-- cairn ROW SECURITY tenant_limits
ALTER TABLE cairn.tenant_limits ENABLE ROW LEVEL SECURITY;

-- cairn ROW SECURITY tenant_models
ALTER TABLE cairn.tenant_models ENABLE ROW LEVEL SECURITY;

-- cairn TABLE model_usage
CREATE TABLE cairn.model_usage (
    tenant_id uuid NOT NULL,
    day date NOT NULL,
    purpose text NOT NULL,
    model text NOT NULL,
    calls bigint DEFAULT 0 NOT NULL,
    failures bigint DEFAULT 0 NOT NULL,
    prompt_tokens bigint DEFAULT 0 NOT NULL,
    completion_tokens bigint DEFAULT 0 NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT model_usage_counts_check CHECK (((calls >= 0) AND (failures >= 0) AND (prompt_tokens >= 0) AND (completion_tokens >= 0))),
    CONSTRAINT model_usage_model_check CHECK (((length(model) >= 1) AND (length(model) <= 200))),
    CONSTRAINT model_usage_purpose_check CHECK (((length(purpose) >= 1) AND (length(purpose) <= 64)))
);
ALTER TABLE ONLY cairn.model_usage FORCE ROW LEVEL SECURITY;

-- cairn TABLE outbox
CREATE TABLE cairn.outbox (
    consumer text NOT NULL,
    causation_id uuid NOT NULL,
    seq integer NOT NULL,
    tenant_id uuid NOT NULL,
    event text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE ONLY cairn.outbox FORCE ROW LEVEL SECURITY;

-- cairn TABLE processed_events
CREATE TABLE cairn.processed_events (
    consumer text NOT NULL,
    event_id uuid NOT NULL,
    tenant_id uuid NOT NULL,
    processed_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE ONLY cairn.processed_events FORCE ROW LEVEL SECURITY;

-- cairn TABLE tenant_limits
CREATE TABLE cairn.tenant_limits (
    tenant_id uuid NOT NULL,
    limits jsonb NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tenant_limits_limits_check CHECK ((jsonb_typeof(limits) = 'object'::text))
);

-- cairn TABLE tenant_models
CREATE TABLE cairn.tenant_models (
    tenant_id uuid NOT NULL,
    base_url text NOT NULL,
    model text NOT NULL,
    api_key text,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tenant_models_api_key_check CHECK (((length(api_key) >= 1) AND (length(api_key) <= 4000))),
    CONSTRAINT tenant_models_base_url_check CHECK (((length(base_url) >= 1) AND (length(base_url) <= 2000))),
    CONSTRAINT tenant_models_model_check CHECK (((length(model) >= 1) AND (length(model) <= 200)))
);
ALTER TABLE ONLY cairn.tenant_models FORCE ROW LEVEL SECURITY;

-- consolidation ACL FUNCTION due_flushes(p_limit integer)
REVOKE ALL ON FUNCTION consolidation.due_flushes(p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION consolidation.due_flushes(p_limit integer) TO cairn_app;

-- consolidation ACL TABLE document_versions
GRANT SELECT,INSERT,UPDATE ON TABLE consolidation.document_versions TO cairn_app;

-- consolidation ACL TABLE documents
GRANT SELECT,INSERT,UPDATE ON TABLE consolidation.documents TO cairn_app;

-- consolidation ACL TABLE flushes_due
GRANT SELECT,INSERT,UPDATE ON TABLE consolidation.flushes_due TO cairn_app;

-- consolidation ACL TABLE record_requests
GRANT SELECT,INSERT ON TABLE consolidation.record_requests TO cairn_app;

-- consolidation ACL TABLE records
GRANT SELECT,INSERT,UPDATE ON TABLE consolidation.records TO cairn_app;

-- consolidation ACL TABLE write_outcomes
GRANT SELECT,INSERT,DELETE ON TABLE consolidation.write_outcomes TO cairn_app;

-- consolidation CONSTRAINT document_versions document_versions_pkey
ALTER TABLE ONLY consolidation.document_versions
    ADD CONSTRAINT document_versions_pkey PRIMARY KEY (tenant_id, agent_id, path, version);

-- consolidation CONSTRAINT documents documents_pkey
ALTER TABLE ONLY consolidation.documents
    ADD CONSTRAINT documents_pkey PRIMARY KEY (tenant_id, agent_id, path);

-- consolidation CONSTRAINT flushes_due flushes_due_pkey
ALTER TABLE ONLY consolidation.flushes_due
    ADD CONSTRAINT flushes_due_pkey PRIMARY KEY (tenant_id, session_id, reset_index, cycle);

-- consolidation CONSTRAINT record_requests record_requests_pkey
ALTER TABLE ONLY consolidation.record_requests
    ADD CONSTRAINT record_requests_pkey PRIMARY KEY (tenant_id, request_id);

-- consolidation CONSTRAINT records records_pkey
ALTER TABLE ONLY consolidation.records
    ADD CONSTRAINT records_pkey PRIMARY KEY (tenant_id, record_id);

-- consolidation CONSTRAINT write_outcomes write_outcomes_pkey
ALTER TABLE ONLY consolidation.write_outcomes
    ADD CONSTRAINT write_outcomes_pkey PRIMARY KEY (tenant_id, request_id);

-- consolidation FUNCTION due_flushes(integer)
CREATE FUNCTION consolidation.due_flushes(p_limit integer) RETURNS TABLE(tenant_id uuid, session_id uuid, reset_index integer, cycle integer)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'consolidation', 'pg_temp'
    AS $$
    SELECT f.tenant_id, f.session_id, f.reset_index, f.cycle FROM consolidation.flushes_due f
    WHERE f.done_at IS NULL AND f.next_attempt_at <= now()
    ORDER BY f.next_attempt_at LIMIT p_limit
$$;

-- consolidation INDEX flushes_due_next
CREATE INDEX flushes_due_next ON consolidation.flushes_due USING btree (next_attempt_at) WHERE (done_at IS NULL);

-- consolidation INDEX record_requests_position
CREATE INDEX record_requests_position ON consolidation.record_requests USING btree (tenant_id, agent_id, ingest_seq);

-- consolidation INDEX records_agent_valid
CREATE INDEX records_agent_valid ON consolidation.records USING btree (tenant_id, agent_id, valid_from);

-- consolidation INDEX records_current_hash
CREATE INDEX records_current_hash ON consolidation.records USING btree (tenant_id, agent_id, content_hash) WHERE (retired_at IS NULL);

-- consolidation INDEX records_current_slot
CREATE INDEX records_current_slot ON consolidation.records USING btree (tenant_id, agent_id, entity, relation) WHERE (retired_at IS NULL);

-- consolidation INDEX records_merged
CREATE INDEX records_merged ON consolidation.records USING gin (merged_ids);

-- consolidation INDEX write_outcomes_age
CREATE INDEX write_outcomes_age ON consolidation.write_outcomes USING btree (tenant_id, decided_at);

-- consolidation POLICY document_versions tenant_isolation
CREATE POLICY tenant_isolation ON consolidation.document_versions USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- consolidation POLICY documents tenant_isolation
CREATE POLICY tenant_isolation ON consolidation.documents USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- consolidation POLICY flushes_due tenant_isolation
CREATE POLICY tenant_isolation ON consolidation.flushes_due USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- consolidation POLICY record_requests tenant_isolation
CREATE POLICY tenant_isolation ON consolidation.record_requests USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- consolidation POLICY records tenant_isolation
CREATE POLICY tenant_isolation ON consolidation.records USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- consolidation POLICY write_outcomes tenant_isolation
CREATE POLICY tenant_isolation ON consolidation.write_outcomes USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- consolidation ROW SECURITY document_versions
ALTER TABLE consolidation.document_versions ENABLE ROW LEVEL SECURITY;

-- consolidation ROW SECURITY documents
ALTER TABLE consolidation.documents ENABLE ROW LEVEL SECURITY;

-- consolidation ROW SECURITY flushes_due
ALTER TABLE consolidation.flushes_due ENABLE ROW LEVEL SECURITY;

-- consolidation ROW SECURITY record_requests
ALTER TABLE consolidation.record_requests ENABLE ROW LEVEL SECURITY;

-- consolidation ROW SECURITY records
ALTER TABLE consolidation.records ENABLE ROW LEVEL SECURITY;

-- consolidation ROW SECURITY write_outcomes
ALTER TABLE consolidation.write_outcomes ENABLE ROW LEVEL SECURITY;

-- consolidation TABLE document_versions
CREATE TABLE consolidation.document_versions (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    path text NOT NULL,
    version integer NOT NULL,
    text text NOT NULL,
    change text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE ONLY consolidation.document_versions FORCE ROW LEVEL SECURITY;

-- consolidation TABLE documents
CREATE TABLE consolidation.documents (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    path text NOT NULL,
    version integer NOT NULL,
    text text NOT NULL,
    deleted boolean DEFAULT false NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE ONLY consolidation.documents FORCE ROW LEVEL SECURITY;

-- consolidation TABLE flushes_due
CREATE TABLE consolidation.flushes_due (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    session_id uuid NOT NULL,
    cycle integer NOT NULL,
    session_key text NOT NULL,
    requested_at timestamp with time zone DEFAULT now() NOT NULL,
    done_at timestamp with time zone,
    reset_index integer DEFAULT 0 NOT NULL,
    up_to_position integer,
    forced boolean DEFAULT false NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    failures integer DEFAULT 0 NOT NULL,
    last_error text,
    last_attempt_at timestamp with time zone,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    daily_path text,
    notes_chars integer,
    refused integer DEFAULT 0 NOT NULL
);

-- consolidation TABLE record_requests
CREATE TABLE consolidation.record_requests (
    tenant_id uuid NOT NULL,
    request_id uuid NOT NULL,
    agent_id text NOT NULL,
    ingest_seq bigint NOT NULL,
    record_id uuid NOT NULL,
    outcome text NOT NULL,
    decided_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE ONLY consolidation.record_requests FORCE ROW LEVEL SECURITY;

-- consolidation TABLE records
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
    pending text,
    session_key text,
    session_id text,
    message_ids text[] DEFAULT '{}'::text[] NOT NULL,
    origin text NOT NULL,
    merged_ids uuid[] DEFAULT '{}'::uuid[] NOT NULL,
    bank_path text NOT NULL,
    bank_line integer,
    rendered text,
    embedding public.vector,
    embedding_model text,
    CONSTRAINT records_importance_check CHECK (((importance >= (0)::double precision) AND (importance <= (1)::double precision))),
    CONSTRAINT records_kind_check CHECK ((kind = ANY (ARRAY['profile'::text, 'preference'::text, 'event'::text, 'plan'::text, 'lesson'::text, 'project'::text]))),
    CONSTRAINT records_origin_check CHECK ((origin = ANY (ARRAY['owner'::text, 'agent'::text, 'untrusted'::text, 'system'::text])))
);
ALTER TABLE ONLY consolidation.records FORCE ROW LEVEL SECURITY;

-- consolidation TABLE write_outcomes
CREATE TABLE consolidation.write_outcomes (
    tenant_id uuid NOT NULL,
    request_id uuid NOT NULL,
    agent_id text NOT NULL,
    path text NOT NULL,
    outcome text NOT NULL,
    version integer NOT NULL,
    change text,
    detail text DEFAULT ''::text NOT NULL,
    decided_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT write_outcomes_outcome_check CHECK ((outcome = ANY (ARRAY['applied'::text, 'unchanged'::text, 'conflict'::text, 'missing'::text, 'too_large'::text])))
);
ALTER TABLE ONLY consolidation.write_outcomes FORCE ROW LEVEL SECURITY;

-- indexer ACL FUNCTION claim_embedding_model(p_model text, p_starting boolean, p_live interval)
REVOKE ALL ON FUNCTION indexer.claim_embedding_model(p_model text, p_starting boolean, p_live interval) FROM PUBLIC;
GRANT ALL ON FUNCTION indexer.claim_embedding_model(p_model text, p_starting boolean, p_live interval) TO cairn_app;

-- indexer ACL FUNCTION due_memory_sessions(p_limit integer)
REVOKE ALL ON FUNCTION indexer.due_memory_sessions(p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION indexer.due_memory_sessions(p_limit integer) TO cairn_app;

-- indexer ACL FUNCTION estimated_matches(p_keyed tsquery)
REVOKE ALL ON FUNCTION indexer.estimated_matches(p_keyed tsquery) FROM PUBLIC;

-- indexer ACL FUNCTION matching_memory_chunks(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap integer, p_paths text[])
REVOKE ALL ON FUNCTION indexer.matching_memory_chunks(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap integer, p_paths text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION indexer.matching_memory_chunks(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap integer, p_paths text[]) TO cairn_app;

-- indexer ACL FUNCTION matching_messages(p_tenant uuid, p_query tsquery, p_agent text, p_session_keys text[], p_cap integer, p_after_at timestamp with time zone, p_after_id uuid, p_within tsquery, p_share double precision)
REVOKE ALL ON FUNCTION indexer.matching_messages(p_tenant uuid, p_query tsquery, p_agent text, p_session_keys text[], p_cap integer, p_after_at timestamp with time zone, p_after_id uuid, p_within tsquery, p_share double precision) FROM PUBLIC;
GRANT ALL ON FUNCTION indexer.matching_messages(p_tenant uuid, p_query tsquery, p_agent text, p_session_keys text[], p_cap integer, p_after_at timestamp with time zone, p_after_id uuid, p_within tsquery, p_share double precision) TO cairn_app;

-- indexer ACL FUNCTION memory_chunk_keys_deleted()
REVOKE ALL ON FUNCTION indexer.memory_chunk_keys_deleted() FROM PUBLIC;

-- indexer ACL FUNCTION memory_chunk_keys_inserted()
REVOKE ALL ON FUNCTION indexer.memory_chunk_keys_inserted() FROM PUBLIC;

-- indexer ACL FUNCTION memory_chunk_keys_updated()
REVOKE ALL ON FUNCTION indexer.memory_chunk_keys_updated() FROM PUBLIC;

-- indexer ACL FUNCTION memory_chunk_vectors_deleted()
REVOKE ALL ON FUNCTION indexer.memory_chunk_vectors_deleted() FROM PUBLIC;

-- indexer ACL FUNCTION memory_chunk_vectors_inserted()
REVOKE ALL ON FUNCTION indexer.memory_chunk_vectors_inserted() FROM PUBLIC;

-- indexer ACL FUNCTION memory_chunk_vectors_updated()
REVOKE ALL ON FUNCTION indexer.memory_chunk_vectors_updated() FROM PUBLIC;

-- indexer ACL FUNCTION memory_chunks_on_days(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_days text[], p_limit integer)
REVOKE ALL ON FUNCTION indexer.memory_chunks_on_days(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_days text[], p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION indexer.memory_chunks_on_days(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_days text[], p_limit integer) TO cairn_app;

-- indexer ACL FUNCTION memory_matches_by_bitmap(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap integer)
REVOKE ALL ON FUNCTION indexer.memory_matches_by_bitmap(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap integer) FROM PUBLIC;

-- indexer ACL FUNCTION memory_matches_in_paths(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap integer, p_paths text[])
REVOKE ALL ON FUNCTION indexer.memory_matches_in_paths(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap integer, p_paths text[]) FROM PUBLIC;

-- indexer ACL FUNCTION memory_matches_sample(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_required bit, p_rows integer, OUT seen integer, OUT matched integer, OUT passed integer)
REVOKE ALL ON FUNCTION indexer.memory_matches_sample(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_required bit, p_rows integer, OUT seen integer, OUT matched integer, OUT passed integer) FROM PUBLIC;

-- indexer ACL FUNCTION memory_matches_walking(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap integer)
REVOKE ALL ON FUNCTION indexer.memory_matches_walking(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap integer) FROM PUBLIC;

-- indexer ACL FUNCTION memory_matches_walking_by_bits(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap integer)
REVOKE ALL ON FUNCTION indexer.memory_matches_walking_by_bits(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap integer) FROM PUBLIC;

-- indexer ACL FUNCTION occurred_at_histogram()
REVOKE ALL ON FUNCTION indexer.occurred_at_histogram() FROM PUBLIC;

-- indexer ACL FUNCTION search_messages(p_tenant uuid, p_any tsquery, p_all tsquery, p_limit integer, p_offset integer, p_agent text, p_session_keys text[], p_lexemes text[], p_weights double precision[], p_cap integer)
REVOKE ALL ON FUNCTION indexer.search_messages(p_tenant uuid, p_any tsquery, p_all tsquery, p_limit integer, p_offset integer, p_agent text, p_session_keys text[], p_lexemes text[], p_weights double precision[], p_cap integer) FROM PUBLIC;
GRANT ALL ON FUNCTION indexer.search_messages(p_tenant uuid, p_any tsquery, p_all tsquery, p_limit integer, p_offset integer, p_agent text, p_session_keys text[], p_lexemes text[], p_weights double precision[], p_cap integer) TO cairn_app;

-- indexer ACL FUNCTION stale_memory_agents(p_model text)
REVOKE ALL ON FUNCTION indexer.stale_memory_agents(p_model text) FROM PUBLIC;
GRANT ALL ON FUNCTION indexer.stale_memory_agents(p_model text) TO cairn_app;

-- indexer ACL FUNCTION take_due_memory_sessions(p_limit integer)
REVOKE ALL ON FUNCTION indexer.take_due_memory_sessions(p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION indexer.take_due_memory_sessions(p_limit integer) TO cairn_app;

-- indexer ACL FUNCTION tenant_span(p_tenant uuid, OUT oldest timestamp with time zone, OUT newest timestamp with time zone)
REVOKE ALL ON FUNCTION indexer.tenant_span(p_tenant uuid, OUT oldest timestamp with time zone, OUT newest timestamp with time zone) FROM PUBLIC;

-- indexer ACL TABLE memory_agents
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE indexer.memory_agents TO cairn_app;

-- indexer ACL TABLE memory_chunk_vectors
GRANT SELECT ON TABLE indexer.memory_chunk_vectors TO cairn_app;

-- indexer ACL TABLE memory_chunks
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE indexer.memory_chunks TO cairn_app;

-- indexer ACL TABLE memory_counts
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE indexer.memory_counts TO cairn_app;

-- indexer ACL TABLE memory_pending
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE indexer.memory_pending TO cairn_app;

-- indexer ACL TABLE memory_progress
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE indexer.memory_progress TO cairn_app;

-- indexer ACL TABLE memory_turns
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE indexer.memory_turns TO cairn_app;

-- indexer ACL TABLE message_counts
GRANT SELECT,INSERT,UPDATE ON TABLE indexer.message_counts TO cairn_app;

-- indexer ACL TABLE messages
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE indexer.messages TO cairn_app;

-- indexer ACL TABLE progress
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE indexer.progress TO cairn_app;

-- indexer CONSTRAINT embedding_models embedding_models_pkey
ALTER TABLE ONLY indexer.embedding_models
    ADD CONSTRAINT embedding_models_pkey PRIMARY KEY (model);

-- indexer CONSTRAINT memory_agents memory_agents_pkey
ALTER TABLE ONLY indexer.memory_agents
    ADD CONSTRAINT memory_agents_pkey PRIMARY KEY (tenant_id, agent_id);

-- indexer CONSTRAINT memory_chunk_keys memory_chunk_keys_pkey
ALTER TABLE ONLY indexer.memory_chunk_keys
    ADD CONSTRAINT memory_chunk_keys_pkey PRIMARY KEY (tenant_id, chunk_id);

-- indexer CONSTRAINT memory_chunk_vectors memory_chunk_vectors_pkey
ALTER TABLE ONLY indexer.memory_chunk_vectors
    ADD CONSTRAINT memory_chunk_vectors_pkey PRIMARY KEY (tenant_id, chunk_id);

-- indexer CONSTRAINT memory_chunks memory_chunks_pkey
ALTER TABLE ONLY indexer.memory_chunks
    ADD CONSTRAINT memory_chunks_pkey PRIMARY KEY (tenant_id, chunk_id);

-- indexer CONSTRAINT memory_counts memory_counts_pkey
ALTER TABLE ONLY indexer.memory_counts
    ADD CONSTRAINT memory_counts_pkey PRIMARY KEY (tenant_id, agent_id);

-- indexer CONSTRAINT memory_pending memory_pending_pkey
ALTER TABLE ONLY indexer.memory_pending
    ADD CONSTRAINT memory_pending_pkey PRIMARY KEY (tenant_id, session_id);

-- indexer CONSTRAINT memory_progress memory_progress_pkey
ALTER TABLE ONLY indexer.memory_progress
    ADD CONSTRAINT memory_progress_pkey PRIMARY KEY (tenant_id, agent_id);

-- indexer CONSTRAINT memory_turns memory_turns_pkey
ALTER TABLE ONLY indexer.memory_turns
    ADD CONSTRAINT memory_turns_pkey PRIMARY KEY (tenant_id, session_id, "position");

-- indexer CONSTRAINT message_counts message_counts_pkey
ALTER TABLE ONLY indexer.message_counts
    ADD CONSTRAINT message_counts_pkey PRIMARY KEY (tenant_id, agent_id);

-- indexer CONSTRAINT messages messages_pkey
ALTER TABLE ONLY indexer.messages
    ADD CONSTRAINT messages_pkey PRIMARY KEY (tenant_id, message_id);

-- indexer CONSTRAINT progress progress_pkey
ALTER TABLE ONLY indexer.progress
    ADD CONSTRAINT progress_pkey PRIMARY KEY (tenant_id, agent_id);

-- indexer FUNCTION claim_embedding_model(text, boolean, interval)
CREATE FUNCTION indexer.claim_embedding_model(p_model text, p_starting boolean, p_live interval) RETURNS text
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'indexer', 'pg_temp'
    AS $$
    INSERT INTO indexer.embedding_models AS m (model, started_at, seen_at) VALUES (p_model, now(), now())
    ON CONFLICT (model) DO UPDATE
        SET started_at = CASE WHEN p_starting THEN now() ELSE m.started_at END, seen_at = now();
    SELECT model FROM indexer.embedding_models WHERE seen_at > now() - p_live ORDER BY started_at DESC, model
    LIMIT 1;
$$;

-- indexer FUNCTION count_messages()
CREATE FUNCTION indexer.count_messages() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'indexer', 'pg_temp'
    AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO indexer.message_counts AS c (tenant_id, agent_id, messages)
        SELECT tenant_id, agent_id, count(*) FROM counted_rows GROUP BY tenant_id, agent_id ORDER BY 1, 2
        ON CONFLICT (tenant_id, agent_id) DO UPDATE SET messages = c.messages + excluded.messages;
    ELSE
        UPDATE indexer.message_counts c SET messages = c.messages - gone.messages
        FROM (SELECT tenant_id, agent_id, count(*) AS messages FROM counted_rows GROUP BY tenant_id, agent_id
              ORDER BY 1, 2) gone
        WHERE c.tenant_id = gone.tenant_id AND c.agent_id = gone.agent_id;
    END IF;
    RETURN NULL;
END
$$;

-- indexer FUNCTION due_memory_sessions(integer)
CREATE FUNCTION indexer.due_memory_sessions(p_limit integer) RETURNS TABLE(tenant_id uuid, agent_id text, session_id uuid)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'indexer', 'pg_temp'
    AS $$
    SELECT p.tenant_id, p.agent_id, p.session_id FROM indexer.memory_pending p
    WHERE p.due_at <= now() ORDER BY p.due_at LIMIT p_limit
$$;

-- indexer FUNCTION estimated_matches(tsquery)
CREATE FUNCTION indexer.estimated_matches(p_keyed tsquery) RETURNS double precision
    LANGUAGE plpgsql
    SET search_path TO 'indexer', 'pg_temp'
    AS $$
DECLARE
    plan json;
BEGIN
    EXECUTE format('EXPLAIN (FORMAT JSON) SELECT 1 FROM indexer.messages m WHERE indexer.tenant_terms(m.tenant_id, m.terms) @@ %L::tsquery', p_keyed)
        INTO plan;
    RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8;
END
$$;

-- indexer FUNCTION histogram_at(timestamp with time zone[], double precision)
CREATE FUNCTION indexer.histogram_at(p_bounds timestamp with time zone[], p_position double precision) RETURNS timestamp with time zone
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    n int := cardinality(p_bounds);
    k int;
BEGIN
    IF p_position <= 0 THEN RETURN p_bounds[1]; END IF;
    IF p_position >= n - 1 THEN RETURN p_bounds[n]; END IF;
    k := floor(p_position)::int + 1;
    IF NOT (isfinite(p_bounds[k]) AND isfinite(p_bounds[k + 1])) THEN
        RETURN p_bounds[k];
    END IF;
    RETURN p_bounds[k] + (p_bounds[k + 1] - p_bounds[k]) * (p_position - (k - 1));
END
$$;

-- indexer FUNCTION histogram_position(timestamp with time zone[], timestamp with time zone)
CREATE FUNCTION indexer.histogram_position(p_bounds timestamp with time zone[], p_at timestamp with time zone) RETURNS double precision
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    lo int := 1;
    hi int := cardinality(p_bounds);
    mid int;
BEGIN
    IF p_at <= p_bounds[1] THEN RETURN 0; END IF;
    IF p_at >= p_bounds[hi] THEN RETURN hi - 1; END IF;
    WHILE hi - lo > 1 LOOP  -- p_bounds[lo] < p_at < p_bounds[hi]
        mid := (lo + hi) / 2;
        IF p_bounds[mid] <= p_at THEN lo := mid; ELSE hi := mid; END IF;
    END LOOP;
    IF NOT (isfinite(p_bounds[lo]) AND isfinite(p_bounds[hi])) THEN
        RETURN lo - 1;
    END IF;
    RETURN lo - 1 + extract(epoch FROM p_at - p_bounds[lo]) / greatest(extract(epoch FROM p_bounds[hi] - p_bounds[lo]), 1e-6);
END
$$;

-- indexer FUNCTION lexeme_bit(text)
CREATE FUNCTION indexer.lexeme_bit(p_lexeme text) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN (hashtext("left"(p_lexeme, 4)) & 511);

-- indexer FUNCTION matching_memory_chunks(uuid, text, text[], text, tsquery, integer, text[])
CREATE FUNCTION indexer.matching_memory_chunks(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap integer, p_paths text[] DEFAULT NULL::text[]) RETURNS TABLE(chunk_id uuid, terms tsvector)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'indexer', 'pg_temp'
    AS $$
DECLARE
    sample_rows CONSTANT int := 128;
    plain_walk_rows CONSTANT int := 2000;
    bits_walk_rows CONSTANT int := 50000;
    entries_per_fetch CONSTANT int := 24;
    required bit(512);
    seen int;
    chunks bigint;
    matched int;
    passed int;  -- of the sample, the chunks holding every required bit: what the walk by bits fetches
    entries numeric;  -- what the walk by bits reads of memory_chunks_recent, estimated
    walked_rows bigint;
BEGIN
    IF p_tenant IS DISTINCT FROM cairn.current_tenant() THEN
        RETURN;
    END IF;
    IF p_paths IS NOT NULL THEN
        RETURN QUERY
            WITH walked AS MATERIALIZED (
                SELECT c.chunk_id, c.terms
                FROM (SELECT r.chunk_id, r.occurred_at FROM indexer.memory_chunks r
                      WHERE r.tenant_id = p_tenant AND r.agent_id = p_agent
                      ORDER BY r.occurred_at DESC NULLS LAST, r.chunk_id
                      LIMIT 4 * p_cap) w
                JOIN indexer.memory_chunks c ON c.tenant_id = p_tenant AND c.chunk_id = w.chunk_id
                WHERE c.source = ANY(p_sources)
                  AND (p_exclude_session_key IS NULL OR c.session_key IS DISTINCT FROM p_exclude_session_key)
                  AND EXISTS (SELECT 1 FROM unnest(p_paths) p
                              WHERE c.path = p OR (right(p, 1) = '/' AND starts_with(c.path, p)))
                  AND c.terms @@ p_query
                ORDER BY w.occurred_at DESC NULLS LAST, w.chunk_id
                LIMIT p_cap
            )
            SELECT k.chunk_id, k.terms FROM walked k WHERE (SELECT count(*) FROM walked) >= p_cap;
        GET DIAGNOSTICS walked_rows = ROW_COUNT;
        IF walked_rows > 0 THEN
            RETURN;
        END IF;
        RETURN QUERY SELECT m.chunk_id, m.terms
                     FROM indexer.memory_matches_in_paths(p_tenant, p_agent, p_sources, p_exclude_session_key, p_query,
                                                          p_cap, p_paths) m;
        RETURN;
    END IF;
    required := indexer.required_term_bits(p_query);
    chunks := coalesce((SELECT n.chunks FROM indexer.memory_counts n WHERE n.tenant_id = p_tenant AND n.agent_id = p_agent), 0);
    SELECT s.seen, s.matched, s.passed INTO seen, matched, passed
    FROM indexer.memory_matches_sample(p_tenant, p_agent, p_sources, p_exclude_session_key, p_query, required, sample_rows) s;
    IF seen < sample_rows OR matched::bigint * plain_walk_rows >= p_cap::bigint * seen THEN
        RETURN QUERY SELECT w.chunk_id, w.terms
                     FROM indexer.memory_matches_walking(p_tenant, p_agent, p_sources, p_exclude_session_key, p_query, p_cap) w;
        RETURN;
    END IF;
    IF matched::bigint * bits_walk_rows >= p_cap::bigint * seen AND required <> repeat('0', 512)::bit(512) THEN
        entries := CASE WHEN chunks > 0 AND matched::bigint * chunks < p_cap::bigint * seen
                        THEN chunks ELSE p_cap::numeric * seen / matched END;
        IF entries * passed / seen + entries / entries_per_fetch
           <= greatest(plain_walk_rows, matched::numeric * chunks / seen) THEN
            RETURN QUERY SELECT w.chunk_id, w.terms
                         FROM indexer.memory_matches_walking_by_bits(p_tenant, p_agent, p_sources, p_exclude_session_key, p_query, p_cap) w;
            RETURN;
        END IF;
    END IF;
    RETURN QUERY SELECT b.chunk_id, b.terms
                 FROM indexer.memory_matches_by_bitmap(p_tenant, p_agent, p_sources, p_exclude_session_key, p_query, p_cap) b;
END
$$;

-- indexer FUNCTION matching_messages(uuid, tsquery, text, text[], integer, timestamp with time zone, uuid, tsquery, double precision)
CREATE FUNCTION indexer.matching_messages(p_tenant uuid, p_query tsquery, p_agent text, p_session_keys text[], p_cap integer, p_after_at timestamp with time zone DEFAULT NULL::timestamp with time zone, p_after_id uuid DEFAULT NULL::uuid, p_within tsquery DEFAULT NULL::tsquery, p_share double precision DEFAULT 0) RETURNS TABLE(message_id uuid, occurred_at timestamp with time zone, terms tsvector)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'indexer', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    SET max_parallel_workers_per_gather TO '0'
    AS $_$
#variable_conflict use_column
DECLARE
    keyed tsquery := indexer.tenant_terms_query(p_tenant, p_query);
    matches float8;
    size float8;
    before timestamptz := coalesce(p_after_at, 'infinity');
    after_id uuid := p_after_id;
    wanted int := p_cap;
    visits bigint;
    walked bigint := 0;
    hit record;
    last_at timestamptz;
    last_id uuid;
    window_rows bigint;
    cut_at timestamptz;
    cut_id uuid;
    held bigint;
    plan text;
    plan_line text;
    bounds timestamptz[];
    cut_position float8;
    oldest_at timestamptz;
    newest_at timestamptz;
    oldest_position float8;
    span_positions float8;
    keyed_matches float8;
    within_matches float8;
    seen float8;
    newer bigint;
BEGIN
    IF p_tenant IS DISTINCT FROM cairn.current_tenant() OR p_cap <= 0 THEN
        RETURN;
    END IF;
    matches := indexer.estimated_matches(keyed);
    size := (SELECT coalesce(sum(n.messages), 0) FROM indexer.message_counts n WHERE n.tenant_id = p_tenant);
    IF p_within IS NOT NULL AND p_share > 0 THEN
        keyed_matches := matches;
        within_matches := indexer.estimated_matches(indexer.tenant_terms_query(p_tenant, p_within));
        matches := greatest(matches, p_share * within_matches);
        -- where that takes a window (below): the every-term rows the any-term call saw (p_share = seen / found,
        -- p_cap = found - seen) are all of those from p_after_at on, and their density there over the tenant is the
        -- estimate (0151). The planner's estimate of the any-term query counts a word's two forms as independent
        -- rows (1.3-2.1× at 1M) and sized windows too small. The rows from p_after_at on are counted only where that
        -- estimate puts them under 3,000 (at most 2× off) and up to 6,000: counting more costs more than it gains.
        IF matches > 5 * p_cap AND least(matches, size) ^ 2 <= size * p_cap
           AND p_after_at IS NOT NULL AND p_share < 1 AND p_share * p_cap / (1 - p_share) >= 10 THEN
            seen := p_share * p_cap / (1 - p_share);
            IF (p_cap + seen) * size / greatest(within_matches, 1) < 3000 THEN
                newer := (SELECT count(*) FROM (
                              SELECT 1 FROM indexer.messages m
                              WHERE m.tenant_id = p_tenant AND m.occurred_at >= p_after_at LIMIT 6000
                          ) n);
                IF newer > 0 AND newer < 6000 THEN
                    matches := greatest(keyed_matches, seen * size / newer);
                END IF;
            END IF;
        END IF;
    END IF;
    -- never more matches than messages: a key missing from the index's statistics (a rare term, a small tenant's)
    -- gets a default share of the whole table, a thousand rows at 1M, and a tenant of 600 messages walked them all
    matches := least(matches, size);
    -- 0039: walking from the newest reads about size·cap/matches rows, the keys read every match.
    IF matches * matches > size * p_cap THEN
        visits := ceil(4 * size * p_cap / matches);
        -- row by row, to know the oldest it returns: the keys take over strictly after that row, so no row comes
        -- twice and none is skipped even if messages arrive or go between the two statements
        FOR hit IN
            SELECT v.message_id, v.occurred_at, v.terms
            FROM (
                SELECT m.message_id, m.occurred_at, m.terms, m.agent_id, m.session_key
                FROM indexer.messages m
                WHERE m.tenant_id = p_tenant AND m.occurred_at <= before
                  AND (after_id IS NULL OR m.occurred_at < before OR m.message_id > after_id)
                ORDER BY m.occurred_at DESC, m.message_id
                LIMIT visits
            ) v
            WHERE v.terms @@ p_query
              AND (p_agent IS NULL OR v.agent_id = p_agent) AND (p_session_keys IS NULL OR v.session_key = ANY(p_session_keys))
            ORDER BY v.occurred_at DESC, v.message_id
            LIMIT p_cap
        LOOP
            message_id := hit.message_id;
            occurred_at := hit.occurred_at;
            terms := hit.terms;
            RETURN NEXT;
            walked := walked + 1;
            last_at := hit.occurred_at;
            last_id := hit.message_id;
        END LOOP;
        IF walked >= p_cap THEN
            RETURN;
        END IF;
        -- every match among the rows the walk read was returned: the rest are older than the last one returned
        IF walked > 0 THEN
            before := last_at;
            after_id := last_id;
        END IF;
        wanted := p_cap - walked;
    ELSIF matches > 5 * p_cap THEN
        window_rows := ceil(1.2 * size * p_cap / matches);
        FOR window_number IN 1..2 LOOP
            -- the window ends at a time where the occurred_at histogram puts the share window_rows / size of the rows
            -- back from `before`, the tenant's rows taken as spread like the table's between its oldest and newest
            -- (linear inside a bucket, as the planner reads it), and holds every row at that time: cut_id is the
            -- greatest uuid, so the window takes all rows at cut_at and what follows starts strictly before it
            -- (message_id > cut_id is never true).
            -- Any contiguous range of the ranking order will do, its size only decides the work. Before a histogram
            -- (a small table, every time a most common value) the window ends at its exact last row, an index-only
            -- scan of window_rows recency entries (15-27k at 1M); so too for a tenant whose messages span less than
            -- one of the histogram's buckets. Reaching back past the tenant's oldest: the keys fetch the rest.
            IF bounds IS NULL THEN
                bounds := coalesce(indexer.occurred_at_histogram(), '{}');
                IF cardinality(bounds) >= 2 THEN
                    SELECT s.oldest, s.newest INTO oldest_at, newest_at FROM indexer.tenant_span(p_tenant) s;
                    oldest_position := indexer.histogram_position(bounds, oldest_at);
                    span_positions := indexer.histogram_position(bounds, newest_at) - oldest_position;
                END IF;
            END IF;
            IF cardinality(bounds) >= 2 AND span_positions >= 1 THEN
                cut_position := indexer.histogram_position(bounds, least(before, newest_at))
                                - span_positions * window_rows::float8 / greatest(size, 1);
                EXIT WHEN cut_position <= oldest_position;
                cut_at := least(indexer.histogram_at(bounds, cut_position), before);
                cut_id := 'ffffffff-ffff-ffff-ffff-ffffffffffff';
            ELSE
                SELECT m.occurred_at, m.message_id INTO cut_at, cut_id
                FROM indexer.messages m
                WHERE m.tenant_id = p_tenant AND m.occurred_at <= before
                  AND (after_id IS NULL OR m.occurred_at < before OR m.message_id > after_id)
                ORDER BY m.occurred_at DESC, m.message_id
                OFFSET window_rows - 1 LIMIT 1;
                EXIT WHEN NOT FOUND;
            END IF;
            -- the same scan as the statement below, with the same values: if it is the keys' bitmap alone, it reads
            -- every match's row, and the keys' statement does that once
            plan := '';
            FOR plan_line IN EXECUTE $window$EXPLAIN SELECT m.message_id FROM indexer.messages m
                WHERE m.tenant_id = $1 AND indexer.tenant_terms(m.tenant_id, m.terms) @@ $2
                  AND m.occurred_at >= $3 AND m.occurred_at <= $4
                  AND (m.occurred_at > $3 OR m.message_id <= $5)
                  AND ($6::uuid IS NULL OR m.occurred_at < $4 OR m.message_id > $6)
                  AND m.terms @@ $7
                  AND ($8::text IS NULL OR m.agent_id = $8) AND ($9::text[] IS NULL OR m.session_key = ANY($9))$window$
                USING p_tenant, keyed, cut_at, before, cut_id, after_id, p_query, p_agent, p_session_keys
            LOOP
                plan := plan || plan_line || E'\n';
            END LOOP;
            EXIT WHEN position('on messages_tenant_terms' IN plan) > 0 AND position('BitmapAnd' IN plan) = 0;
            -- the subquery takes no order, so the planner ANDs the keys with the recency index's range rather than
            -- walking that range in order
            RETURN QUERY
            SELECT w.message_id, w.occurred_at, w.terms
            FROM (
                SELECT m.message_id, m.occurred_at, m.terms
                FROM indexer.messages m
                WHERE m.tenant_id = p_tenant AND indexer.tenant_terms(m.tenant_id, m.terms) @@ keyed
                  AND m.occurred_at >= cut_at AND m.occurred_at <= before
                  AND (m.occurred_at > cut_at OR m.message_id <= cut_id)
                  AND (after_id IS NULL OR m.occurred_at < before OR m.message_id > after_id)
                  AND m.terms @@ p_query
                  AND (p_agent IS NULL OR m.agent_id = p_agent) AND (p_session_keys IS NULL OR m.session_key = ANY(p_session_keys))
                OFFSET 0
            ) w
            ORDER BY w.occurred_at DESC, w.message_id
            LIMIT wanted;
            GET DIAGNOSTICS held = ROW_COUNT;
            IF held >= wanted THEN
                RETURN;
            END IF;
            -- every match in the window was returned: the rest come after its last row (with a histogram's cut: are
            -- older than cut_at)
            wanted := wanted - held;
            before := cut_at;
            after_id := cut_id;
            -- an estimate too high leaves the window short: once more, sized by the matches it held; a window
            -- that held hardly any says little, and the keys fetch the rest
            window_rows := ceil(1.2 * wanted * window_rows / greatest(held, 1));
            EXIT WHEN window_rows > 2 * ceil(1.2 * size * p_cap / matches);
        END LOOP;
    END IF;
    RETURN QUERY
    SELECT m.message_id, m.occurred_at, m.terms
    FROM indexer.messages m
    WHERE (m.tenant_id = p_tenant) IS TRUE AND indexer.tenant_terms(m.tenant_id, m.terms) @@ keyed
      AND m.occurred_at <= before AND (after_id IS NULL OR m.occurred_at < before OR m.message_id > after_id)
      AND m.terms @@ p_query
      AND (p_agent IS NULL OR m.agent_id = p_agent) AND (p_session_keys IS NULL OR m.session_key = ANY(p_session_keys))
    ORDER BY m.occurred_at DESC, m.message_id
    LIMIT wanted;
END
$_$;

-- indexer FUNCTION memory_chunk_keys_deleted()
CREATE FUNCTION indexer.memory_chunk_keys_deleted() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'indexer', 'pg_temp'
    AS $$
BEGIN
    DELETE FROM indexer.memory_chunk_keys k USING removed o WHERE k.tenant_id = o.tenant_id AND k.chunk_id = o.chunk_id;
    RETURN NULL;
END
$$;

-- indexer FUNCTION memory_chunk_keys_inserted()
CREATE FUNCTION indexer.memory_chunk_keys_inserted() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'indexer', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO indexer.memory_chunk_keys
    SELECT n.tenant_id, n.chunk_id, n.agent_id, n.source, n.session_key, n.occurred_at, strip(n.terms) FROM added n;
    RETURN NULL;
END
$$;

-- indexer FUNCTION memory_chunk_keys_updated()
CREATE FUNCTION indexer.memory_chunk_keys_updated() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'indexer', 'pg_temp'
    AS $$
BEGIN
    DELETE FROM indexer.memory_chunk_keys k WHERE k.tenant_id = OLD.tenant_id AND k.chunk_id = OLD.chunk_id;
    INSERT INTO indexer.memory_chunk_keys
    VALUES (NEW.tenant_id, NEW.chunk_id, NEW.agent_id, NEW.source, NEW.session_key, NEW.occurred_at, strip(NEW.terms));
    RETURN NULL;
END
$$;

-- indexer FUNCTION memory_chunk_vectors_deleted()
CREATE FUNCTION indexer.memory_chunk_vectors_deleted() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'indexer', 'pg_temp'
    AS $$
BEGIN
    DELETE FROM indexer.memory_chunk_vectors v USING removed o WHERE v.tenant_id = o.tenant_id AND v.chunk_id = o.chunk_id;
    RETURN NULL;
END
$$;

-- indexer FUNCTION memory_chunk_vectors_inserted()
CREATE FUNCTION indexer.memory_chunk_vectors_inserted() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'indexer', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO indexer.memory_chunk_vectors
    SELECT n.tenant_id, n.chunk_id, n.agent_id, n.source, n.session_key, n.path, n.model, n.embedding FROM added n
    WHERE n.embedding IS NOT NULL;
    RETURN NULL;
END
$$;

-- indexer FUNCTION memory_chunk_vectors_updated()
CREATE FUNCTION indexer.memory_chunk_vectors_updated() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'indexer', 'pg_temp'
    AS $$
BEGIN
    DELETE FROM indexer.memory_chunk_vectors v WHERE v.tenant_id = OLD.tenant_id AND v.chunk_id = OLD.chunk_id;
    IF NEW.embedding IS NOT NULL THEN
        INSERT INTO indexer.memory_chunk_vectors
        VALUES (NEW.tenant_id, NEW.chunk_id, NEW.agent_id, NEW.source, NEW.session_key, NEW.path, NEW.model, NEW.embedding);
    END IF;
    RETURN NULL;
END
$$;

-- indexer FUNCTION memory_chunks_on_days(uuid, text, text[], text, text[], integer)
CREATE FUNCTION indexer.memory_chunks_on_days(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_days text[], p_limit integer) RETURNS TABLE(chunk_id uuid)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'indexer', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
    SELECT c.chunk_id
    FROM indexer.memory_chunks c
    WHERE c.tenant_id = p_tenant AND p_tenant = cairn.current_tenant() AND c.agent_id = p_agent
      AND c.source = ANY(p_sources) AND (p_exclude_session_key IS NULL OR c.session_key IS DISTINCT FROM p_exclude_session_key)
      AND indexer.memory_month_day(c.dated, c.occurred_at) = ANY(p_days)
    ORDER BY c.occurred_at, c.start_line, c.chunk_id
    LIMIT p_limit
$$;

-- indexer FUNCTION memory_matches_by_bitmap(uuid, text, text[], text, tsquery, integer)
CREATE FUNCTION indexer.memory_matches_by_bitmap(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap integer) RETURNS TABLE(chunk_id uuid, terms tsvector)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'indexer', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    SET enable_seqscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET enable_material TO 'off'
    AS $$
    SELECT m.chunk_id, m.terms
    FROM (
        SELECT k.chunk_id, k.occurred_at
        FROM indexer.memory_chunk_keys k
        WHERE indexer.tenant_terms(k.tenant_id, k.lexemes) @@ indexer.tenant_terms_query(p_tenant, p_query)
          AND (k.tenant_id = p_tenant) IS TRUE AND p_tenant = cairn.current_tenant() AND (k.agent_id = p_agent) IS TRUE
          AND k.source = ANY(p_sources) AND (p_exclude_session_key IS NULL OR k.session_key IS DISTINCT FROM p_exclude_session_key)
        ORDER BY k.occurred_at DESC NULLS LAST, k.chunk_id
    ) newest
    CROSS JOIN LATERAL (
        SELECT c.chunk_id, c.terms FROM indexer.memory_chunks c
        WHERE c.tenant_id = p_tenant AND c.chunk_id = newest.chunk_id AND c.terms @@ p_query
    ) m
    ORDER BY newest.occurred_at DESC NULLS LAST, newest.chunk_id
    LIMIT p_cap
$$;

-- indexer FUNCTION memory_matches_in_paths(uuid, text, text[], text, tsquery, integer, text[])
CREATE FUNCTION indexer.memory_matches_in_paths(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap integer, p_paths text[]) RETURNS TABLE(chunk_id uuid, terms tsvector)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'indexer', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    SET enable_seqscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET enable_material TO 'off'
    AS $$
    SELECT m.chunk_id, m.terms
    FROM (
        SELECT k.chunk_id, k.occurred_at
        FROM indexer.memory_chunk_keys k
        WHERE indexer.tenant_terms(k.tenant_id, k.lexemes) @@ indexer.tenant_terms_query(p_tenant, p_query)
          AND (k.tenant_id = p_tenant) IS TRUE AND p_tenant = cairn.current_tenant() AND (k.agent_id = p_agent) IS TRUE
          AND k.source = ANY(p_sources) AND (p_exclude_session_key IS NULL OR k.session_key IS DISTINCT FROM p_exclude_session_key)
        ORDER BY k.occurred_at DESC NULLS LAST, k.chunk_id
    ) newest
    CROSS JOIN LATERAL (
        SELECT c.chunk_id, c.terms FROM indexer.memory_chunks c
        WHERE c.tenant_id = p_tenant AND c.chunk_id = newest.chunk_id AND c.terms @@ p_query
          AND EXISTS (SELECT 1 FROM unnest(p_paths) p WHERE c.path = p OR (right(p, 1) = '/' AND starts_with(c.path, p)))
    ) m
    ORDER BY newest.occurred_at DESC NULLS LAST, newest.chunk_id
    LIMIT p_cap
$$;

-- indexer FUNCTION memory_matches_sample(uuid, text, text[], text, tsquery, bit, integer)
CREATE FUNCTION indexer.memory_matches_sample(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_required bit, p_rows integer, OUT seen integer, OUT matched integer, OUT passed integer) RETURNS record
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'indexer', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    SET enable_bitmapscan TO 'off'
    SET enable_seqscan TO 'off'
    SET enable_sort TO 'off'
    AS $$
    SELECT count(*)::int, (count(*) FILTER (WHERE newest.terms @@ p_query))::int,
           (count(*) FILTER (WHERE (newest.term_bits & p_required) = p_required))::int
    FROM (
        SELECT c.terms, c.term_bits FROM indexer.memory_chunks c
        WHERE c.tenant_id = p_tenant AND p_tenant = cairn.current_tenant() AND c.agent_id = p_agent
          AND c.source = ANY(p_sources) AND (p_exclude_session_key IS NULL OR c.session_key IS DISTINCT FROM p_exclude_session_key)
        ORDER BY c.occurred_at DESC NULLS LAST, c.chunk_id
        LIMIT p_rows
    ) newest
$$;

-- indexer FUNCTION memory_matches_walking(uuid, text, text[], text, tsquery, integer)
CREATE FUNCTION indexer.memory_matches_walking(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap integer) RETURNS TABLE(chunk_id uuid, terms tsvector)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'indexer', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    SET enable_bitmapscan TO 'off'
    SET enable_seqscan TO 'off'
    SET enable_sort TO 'off'
    AS $$
    SELECT c.chunk_id, c.terms
    FROM indexer.memory_chunks c
    WHERE c.tenant_id = p_tenant AND p_tenant = cairn.current_tenant() AND c.agent_id = p_agent
      AND c.source = ANY(p_sources) AND (p_exclude_session_key IS NULL OR c.session_key IS DISTINCT FROM p_exclude_session_key)
      AND c.terms @@ p_query
    ORDER BY c.occurred_at DESC NULLS LAST, c.chunk_id
    LIMIT p_cap
$$;

-- indexer FUNCTION memory_matches_walking_by_bits(uuid, text, text[], text, tsquery, integer)
CREATE FUNCTION indexer.memory_matches_walking_by_bits(p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap integer) RETURNS TABLE(chunk_id uuid, terms tsvector)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'indexer', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    SET enable_bitmapscan TO 'off'
    SET enable_seqscan TO 'off'
    SET enable_sort TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET enable_material TO 'off'
    AS $$
    SELECT m.chunk_id, m.terms
    FROM (
        SELECT c.chunk_id, c.occurred_at
        FROM indexer.memory_chunks c
        WHERE c.tenant_id = p_tenant AND p_tenant = cairn.current_tenant() AND c.agent_id = p_agent
          AND c.source = ANY(p_sources) AND (p_exclude_session_key IS NULL OR c.session_key IS DISTINCT FROM p_exclude_session_key)
          AND (c.term_bits & indexer.required_term_bits(p_query)) = indexer.required_term_bits(p_query)
        ORDER BY c.occurred_at DESC NULLS LAST, c.chunk_id
    ) kept
    CROSS JOIN LATERAL (
        SELECT r.chunk_id, r.terms FROM indexer.memory_chunks r
        WHERE r.tenant_id = p_tenant AND r.chunk_id = kept.chunk_id AND r.terms @@ p_query
    ) m
    ORDER BY kept.occurred_at DESC NULLS LAST, kept.chunk_id
    LIMIT p_cap
$$;

-- indexer FUNCTION memory_month_day(date, timestamp with time zone)
CREATE FUNCTION indexer.memory_month_day(p_dated date, p_occurred_at timestamp with time zone) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN to_char(COALESCE((p_dated)::timestamp without time zone, (p_occurred_at AT TIME ZONE 'UTC'::text)), 'MM-DD'::text);

-- indexer FUNCTION occurred_at_histogram()
CREATE FUNCTION indexer.occurred_at_histogram() RETURNS timestamp with time zone[]
    LANGUAGE plpgsql STABLE
    SET search_path TO 'indexer', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
BEGIN
    RETURN (SELECT s.histogram_bounds::text::timestamptz[] FROM pg_stats s
            WHERE s.schemaname = 'indexer' AND s.tablename = 'messages' AND s.attname = 'occurred_at');
END
$$;

-- indexer FUNCTION required_term_bits(tsquery)
CREATE FUNCTION indexer.required_term_bits(p_query tsquery) RETURNS bit
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path TO 'indexer', 'pg_temp'
    AS $_$
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
$_$;

-- indexer FUNCTION search_messages(uuid, tsquery, tsquery, integer, integer, text, text[], text[], double precision[], integer)
CREATE FUNCTION indexer.search_messages(p_tenant uuid, p_any tsquery, p_all tsquery, p_limit integer, p_offset integer, p_agent text, p_session_keys text[], p_lexemes text[], p_weights double precision[], p_cap integer) RETURNS TABLE(session_key text, session_id text, message_id text, role text, occurred_at timestamp with time zone, text text, external_id text, score double precision)
    LANGUAGE plpgsql
    SET search_path TO 'indexer', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
#variable_conflict use_column
DECLARE
    any_query tsquery := CASE WHEN p_any = p_all THEN p_any ELSE p_any || p_all END;
    slot_count int;
    tenant_messages bigint;
BEGIN
    IF coalesce(current_setting('cairn.tenant_id', true), '') NOT IN ('', p_tenant::text) THEN
        RAISE EXCEPTION 'search_messages for tenant % inside a transaction of another tenant', p_tenant;
    END IF;
    PERFORM set_config('cairn.tenant_id', p_tenant::text, true);
    -- the slot ranking needs every asked lexeme non-empty and weighted (else the statement of 0070 ranks); plain
    -- expressions, which plpgsql evaluates without planning a statement
    IF array_position(p_lexemes, NULL) IS NULL AND array_position(p_lexemes, '') IS NULL
       AND cardinality(p_weights) >= cardinality(p_lexemes) AND array_position(p_weights, NULL) IS NULL THEN
        slot_count := length(array_to_tsvector(p_lexemes));
    END IF;
    -- and a tenant large enough for it to pay: its plan costs a fixed ~0.3-0.7 ms a call more, which a tenant under
    -- ~3,000 messages (and its few candidates) does not win back
    IF slot_count <= 8 THEN
        SELECT sum(n.messages) INTO tenant_messages FROM indexer.message_counts n WHERE n.tenant_id = p_tenant;
    END IF;
    IF tenant_messages >= 3000 THEN
        RETURN QUERY
        WITH some_term AS MATERIALIZED (
            SELECT s.message_id, s.occurred_at, s.terms @@ p_all AS every, s.terms
            FROM indexer.matching_messages(p_tenant, any_query, p_agent, p_session_keys, p_cap) s
        ),
        reach AS MATERIALIZED (
            SELECT count(*)::int AS found, (count(*) FILTER (WHERE every))::int AS every,
                   (array_agg(s.occurred_at ORDER BY s.occurred_at, s.message_id DESC))[1] AS oldest_at,
                   (array_agg(s.message_id ORDER BY s.occurred_at, s.message_id DESC))[1] AS oldest_id
            FROM some_term s
        ),
        every_term AS MATERIALIZED (
            SELECT e.message_id, e.occurred_at, true AS every, e.terms
            FROM reach r,
                 indexer.matching_messages(p_tenant, p_all, p_agent, p_session_keys, p_cap - r.every, r.oldest_at,
                                           r.oldest_id, any_query, r.every::float8 / greatest(r.found, 1)) e
            WHERE p_any <> p_all AND r.found >= p_cap AND r.every < p_cap
        ),
        -- the asked lexemes in the order of a tsvector's (the order unnest gives), each as a one-lexeme tsquery
        slots AS MATERIALIZED (
            SELECT l.lexemes,
                   l.queries[1] AS q1,
               l.queries[2] AS q2,
               l.queries[3] AS q3,
               l.queries[4] AS q4,
               l.queries[5] AS q5,
               l.queries[6] AS q6,
               l.queries[7] AS q7,
               l.queries[8] AS q8
            FROM (SELECT v.lexemes,
                         ARRAY(SELECT ('''' || replace(replace(x, '\', '\\'), '''', '''''') || '''')::tsquery
                               FROM unnest(v.lexemes) x) AS queries
                  FROM (SELECT tsvector_to_array(array_to_tsvector(p_lexemes)) AS lexemes) v) l
        ),
        -- one row per candidate: tf of each slot, 0 where it is absent; 1 without reading positions when no asked
        -- lexeme occurs twice (its text has no comma)
        candidates AS MATERIALIZED (
            SELECT c.message_id, c.occurred_at, c.every, length(c.terms) AS length, length(x.asked) AS present,
               CASE WHEN (SELECT s.q1 FROM slots s) IS NULL OR NOT x.asked @@ (SELECT s.q1 FROM slots s) THEN 0
                    WHEN x.single THEN 1
                    ELSE (SELECT cardinality(u.positions) FROM unnest(x.asked) u
                          WHERE u.lexeme = (SELECT s.lexemes[1] FROM slots s)) END AS tf1,
               CASE WHEN (SELECT s.q2 FROM slots s) IS NULL OR NOT x.asked @@ (SELECT s.q2 FROM slots s) THEN 0
                    WHEN x.single THEN 1
                    ELSE (SELECT cardinality(u.positions) FROM unnest(x.asked) u
                          WHERE u.lexeme = (SELECT s.lexemes[2] FROM slots s)) END AS tf2,
               CASE WHEN (SELECT s.q3 FROM slots s) IS NULL OR NOT x.asked @@ (SELECT s.q3 FROM slots s) THEN 0
                    WHEN x.single THEN 1
                    ELSE (SELECT cardinality(u.positions) FROM unnest(x.asked) u
                          WHERE u.lexeme = (SELECT s.lexemes[3] FROM slots s)) END AS tf3,
               CASE WHEN (SELECT s.q4 FROM slots s) IS NULL OR NOT x.asked @@ (SELECT s.q4 FROM slots s) THEN 0
                    WHEN x.single THEN 1
                    ELSE (SELECT cardinality(u.positions) FROM unnest(x.asked) u
                          WHERE u.lexeme = (SELECT s.lexemes[4] FROM slots s)) END AS tf4,
               CASE WHEN (SELECT s.q5 FROM slots s) IS NULL OR NOT x.asked @@ (SELECT s.q5 FROM slots s) THEN 0
                    WHEN x.single THEN 1
                    ELSE (SELECT cardinality(u.positions) FROM unnest(x.asked) u
                          WHERE u.lexeme = (SELECT s.lexemes[5] FROM slots s)) END AS tf5,
               CASE WHEN (SELECT s.q6 FROM slots s) IS NULL OR NOT x.asked @@ (SELECT s.q6 FROM slots s) THEN 0
                    WHEN x.single THEN 1
                    ELSE (SELECT cardinality(u.positions) FROM unnest(x.asked) u
                          WHERE u.lexeme = (SELECT s.lexemes[6] FROM slots s)) END AS tf6,
               CASE WHEN (SELECT s.q7 FROM slots s) IS NULL OR NOT x.asked @@ (SELECT s.q7 FROM slots s) THEN 0
                    WHEN x.single THEN 1
                    ELSE (SELECT cardinality(u.positions) FROM unnest(x.asked) u
                          WHERE u.lexeme = (SELECT s.lexemes[7] FROM slots s)) END AS tf7,
               CASE WHEN (SELECT s.q8 FROM slots s) IS NULL OR NOT x.asked @@ (SELECT s.q8 FROM slots s) THEN 0
                    WHEN x.single THEN 1
                    ELSE (SELECT cardinality(u.positions) FROM unnest(x.asked) u
                          WHERE u.lexeme = (SELECT s.lexemes[8] FROM slots s)) END AS tf8
            FROM (SELECT * FROM some_term UNION ALL SELECT * FROM every_term) c
                 CROSS JOIN LATERAL (
                     SELECT y.asked, strpos(y.asked::text, ',') = 0 AS single
                     FROM (SELECT ts_filter(setweight(c.terms, 'A', p_lexemes), '{a}') AS asked OFFSET 0) y
                     OFFSET 0) x
        ),
        corpus AS MATERIALIZED (
            SELECT coalesce((SELECT bool_and(p_weights[array_position(p_lexemes, l)] > 0
                                             AND p_weights[array_position(p_lexemes, l)] <= 1000)
                             FROM unnest(p_lexemes) l)
                            AND count(*) FILTER (WHERE c.every AND c.present > 0) >= p_limit::bigint + p_offset,
                            false) AS page,
                   greatest((SELECT least(coalesce(sum(n.messages), 0), 10000) FROM indexer.message_counts n
                             WHERE n.tenant_id = p_tenant), count(*))::float8 AS n,
                   greatest(avg(c.length), 1)::float8 AS length,
                   ARRAY[count(*) FILTER (WHERE c.tf1 > 0),
                         count(*) FILTER (WHERE c.tf2 > 0),
                         count(*) FILTER (WHERE c.tf3 > 0),
                         count(*) FILTER (WHERE c.tf4 > 0),
                         count(*) FILTER (WHERE c.tf5 > 0),
                         count(*) FILTER (WHERE c.tf6 > 0),
                         count(*) FILTER (WHERE c.tf7 > 0),
                         count(*) FILTER (WHERE c.tf8 > 0)]::float8[] AS df
            FROM candidates c
        ),
        idf AS MATERIALIZED (
            SELECT w.idf[1] AS idf1, w.idf[2] AS idf2, w.idf[3] AS idf3, w.idf[4] AS idf4,
                   w.idf[5] AS idf5, w.idf[6] AS idf6, w.idf[7] AS idf7, w.idf[8] AS idf8
            FROM (SELECT ARRAY(SELECT p_weights[array_position(p_lexemes, s.lexemes[i])]
                                      * ln(1 + (o.n - o.df[i] + 0.5) / (o.df[i] + 0.5))
                               FROM generate_subscripts(s.lexemes, 1) i ORDER BY i) AS idf
                  FROM slots s, corpus o) w
        ),
        scored AS (
            SELECT c.message_id, c.occurred_at, c.every,
                   CASE WHEN c.tf1 > 0 OR c.tf2 > 0 OR c.tf3 > 0 OR c.tf4 > 0
                             OR c.tf5 > 0 OR c.tf6 > 0 OR c.tf7 > 0 OR c.tf8 > 0 THEN
                   CASE WHEN c.tf1 > 0 THEN (SELECT i.idf1 FROM idf i) * c.tf1::float8 * 1.9
                        / (c.tf1::float8 + 0.9 * (0.6 + 0.4 * c.length::float8 / (SELECT o.length FROM corpus o)))
                    ELSE 0 END
                 + CASE WHEN c.tf2 > 0 THEN (SELECT i.idf2 FROM idf i) * c.tf2::float8 * 1.9
                        / (c.tf2::float8 + 0.9 * (0.6 + 0.4 * c.length::float8 / (SELECT o.length FROM corpus o)))
                    ELSE 0 END
                 + CASE WHEN c.tf3 > 0 THEN (SELECT i.idf3 FROM idf i) * c.tf3::float8 * 1.9
                        / (c.tf3::float8 + 0.9 * (0.6 + 0.4 * c.length::float8 / (SELECT o.length FROM corpus o)))
                    ELSE 0 END
                 + CASE WHEN c.tf4 > 0 THEN (SELECT i.idf4 FROM idf i) * c.tf4::float8 * 1.9
                        / (c.tf4::float8 + 0.9 * (0.6 + 0.4 * c.length::float8 / (SELECT o.length FROM corpus o)))
                    ELSE 0 END
                 + CASE WHEN c.tf5 > 0 THEN (SELECT i.idf5 FROM idf i) * c.tf5::float8 * 1.9
                        / (c.tf5::float8 + 0.9 * (0.6 + 0.4 * c.length::float8 / (SELECT o.length FROM corpus o)))
                    ELSE 0 END
                 + CASE WHEN c.tf6 > 0 THEN (SELECT i.idf6 FROM idf i) * c.tf6::float8 * 1.9
                        / (c.tf6::float8 + 0.9 * (0.6 + 0.4 * c.length::float8 / (SELECT o.length FROM corpus o)))
                    ELSE 0 END
                 + CASE WHEN c.tf7 > 0 THEN (SELECT i.idf7 FROM idf i) * c.tf7::float8 * 1.9
                        / (c.tf7::float8 + 0.9 * (0.6 + 0.4 * c.length::float8 / (SELECT o.length FROM corpus o)))
                    ELSE 0 END
                 + CASE WHEN c.tf8 > 0 THEN (SELECT i.idf8 FROM idf i) * c.tf8::float8 * 1.9
                        / (c.tf8::float8 + 0.9 * (0.6 + 0.4 * c.length::float8 / (SELECT o.length FROM corpus o)))
                    ELSE 0 END
                   END AS bm25
            FROM candidates c
            WHERE (c.every OR NOT (SELECT o.page FROM corpus o)) AND c.present > 0
        ),
        ranked AS (
            SELECT scored.message_id, scored.occurred_at,
                   (CASE WHEN every THEN 1.0 ELSE 0.0 END + bm25 / (bm25 + 1))::float8 AS score
            FROM scored
            ORDER BY score DESC, scored.occurred_at DESC, scored.message_id
            LIMIT p_limit OFFSET p_offset
        )
        SELECT m.session_key, m.session_id::text, m.message_id::text, m.role, m.occurred_at, m.text, m.external_id,
               r.score
        FROM ranked r JOIN indexer.messages m ON m.tenant_id = p_tenant AND m.message_id = r.message_id
        ORDER BY r.score DESC, r.occurred_at DESC, r.message_id;
        RETURN;
    END IF;
    RETURN QUERY
    WITH some_term AS MATERIALIZED (
        SELECT s.message_id, s.occurred_at, s.terms @@ p_all AS every, length(s.terms) AS length,
               ts_filter(setweight(s.terms, 'A', p_lexemes), '{a}') AS asked
        FROM indexer.matching_messages(p_tenant, any_query, p_agent, p_session_keys, p_cap) s
    ),
    -- how far the any-term candidates reach back, and how many of them have every term
    reach AS MATERIALIZED (
        SELECT count(*)::int AS found, (count(*) FILTER (WHERE every))::int AS every,
               (array_agg(s.occurred_at ORDER BY s.occurred_at, s.message_id DESC))[1] AS oldest_at,
               (array_agg(s.message_id ORDER BY s.occurred_at, s.message_id DESC))[1] AS oldest_id
        FROM some_term s
    ),
    every_term AS MATERIALIZED (
        SELECT e.message_id, e.occurred_at, true AS every, length(e.terms) AS length,
               ts_filter(setweight(e.terms, 'A', p_lexemes), '{a}') AS asked
        FROM reach r,
             indexer.matching_messages(p_tenant, p_all, p_agent, p_session_keys, p_cap - r.every, r.oldest_at,
                                       r.oldest_id, any_query, r.every::float8 / greatest(r.found, 1)) e
        WHERE p_any <> p_all AND r.found >= p_cap AND r.every < p_cap
    ),
    candidates AS MATERIALIZED (
        SELECT * FROM some_term
        UNION ALL
        SELECT * FROM every_term
    ),
    -- the page can be told from the every-term candidates alone when enough of them have an asked lexeme
    every_only AS MATERIALIZED (
        SELECT coalesce((SELECT bool_and(p_weights[array_position(p_lexemes, l)] > 0
                                         AND p_weights[array_position(p_lexemes, l)] <= 1000)
                         FROM unnest(p_lexemes) l)
                        AND count(*) FILTER (WHERE c.every AND length(c.asked) > 0) >= p_limit::bigint + p_offset,
                        false) AS page
        FROM candidates c
    ),
    -- the candidates scored: all, or the every-term ones when the page is theirs
    hits AS (
        SELECT t.message_id, t.occurred_at, t.every, t.length::float8 AS length, (t.term).lexeme,
               cardinality((t.term).positions)::float8 AS tf
        FROM (SELECT c.message_id, c.occurred_at, c.every, c.length, unnest(c.asked) AS term
              FROM candidates c, every_only o WHERE c.every OR NOT o.page) t
    ),
    -- the others' asked lexemes, counted for df only
    unscored AS (
        SELECT unnest(tsvector_to_array(c.asked)) AS lexeme
        FROM candidates c, every_only o WHERE NOT c.every AND o.page
    ),
    stats AS MATERIALIZED (
        SELECT l.lexeme, count(*)::float8 AS df, p_weights[array_position(p_lexemes, l.lexeme)] AS weight
        FROM (SELECT hits.lexeme FROM hits UNION ALL SELECT unscored.lexeme FROM unscored) l GROUP BY l.lexeme
    ),
    corpus AS MATERIALIZED (
        SELECT greatest((SELECT least(coalesce(sum(n.messages), 0), 10000) FROM indexer.message_counts n
                         WHERE n.tenant_id = p_tenant),
                        (SELECT count(*) FROM candidates))::float8 AS n,
               (SELECT greatest(avg(candidates.length), 1) FROM candidates)::float8 AS length
    ),
    scored AS (
        SELECT hits.message_id, hits.occurred_at, hits.every,
               sum(stats.weight * ln(1 + (corpus.n - stats.df + 0.5) / (stats.df + 0.5))
                   * hits.tf * 1.9 / (hits.tf + 0.9 * (0.6 + 0.4 * hits.length / corpus.length))) AS bm25
        FROM hits JOIN stats ON stats.lexeme = hits.lexeme, corpus
        GROUP BY hits.message_id, hits.occurred_at, hits.every
    ),
    ranked AS (
        SELECT scored.message_id, scored.occurred_at,
               (CASE WHEN every THEN 1.0 ELSE 0.0 END + bm25 / (bm25 + 1))::float8 AS score
        FROM scored
        ORDER BY score DESC, scored.occurred_at DESC, scored.message_id
        LIMIT p_limit OFFSET p_offset
    )
    SELECT m.session_key, m.session_id::text, m.message_id::text, m.role, m.occurred_at, m.text, m.external_id,
           r.score
    FROM ranked r JOIN indexer.messages m ON m.tenant_id = p_tenant AND m.message_id = r.message_id
    ORDER BY r.score DESC, r.occurred_at DESC, r.message_id;
END
$$;

-- indexer FUNCTION stale_memory_agents(text)
CREATE FUNCTION indexer.stale_memory_agents(p_model text) RETURNS TABLE(tenant_id uuid, agent_id text, stale bigint)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'indexer', 'pg_temp'
    AS $$
    SELECT c.tenant_id, c.agent_id, count(*) FROM indexer.memory_chunks c
    WHERE c.model < p_model OR c.model > p_model OR c.model IS NULL GROUP BY c.tenant_id, c.agent_id
    UNION ALL
    SELECT m.tenant_id, m.agent_id, count(*) FROM indexer.memory_turns m
    WHERE m.model < p_model OR m.model > p_model GROUP BY m.tenant_id, m.agent_id
$$;

-- indexer FUNCTION take_due_memory_sessions(integer)
CREATE FUNCTION indexer.take_due_memory_sessions(p_limit integer) RETURNS TABLE(tenant_id uuid, agent_id text, session_id uuid, finished boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'indexer', 'pg_temp'
    AS $$
DECLARE
    dropped bigint;
BEGIN
    RETURN QUERY
    WITH forgetting AS (
        SELECT p.tenant_id, p.session_id FROM indexer.memory_pending p
        JOIN indexer.memory_agents a ON a.tenant_id = p.tenant_id AND a.agent_id = p.agent_id
        WHERE p.due_at <= now() AND NOT a.remember
        ORDER BY p.due_at LIMIT 1000
        FOR UPDATE OF p SKIP LOCKED
        FOR SHARE OF a SKIP LOCKED
    ), done AS (
        DELETE FROM indexer.memory_pending p USING forgetting f
        WHERE p.tenant_id = f.tenant_id AND p.session_id = f.session_id
        RETURNING p.tenant_id, p.agent_id, p.session_id
    )
    SELECT d.tenant_id, d.agent_id, d.session_id, true FROM done d;
    GET DIAGNOSTICS dropped = ROW_COUNT;
    IF dropped > 0 THEN
        PERFORM pg_notify('cairn_memory_progress', '');  -- as the worker's finish_pending does
    END IF;
    RETURN QUERY
    SELECT p.tenant_id, p.agent_id, p.session_id, false FROM indexer.memory_pending p
    LEFT JOIN indexer.memory_agents a ON a.tenant_id = p.tenant_id AND a.agent_id = p.agent_id
    WHERE p.due_at <= now() AND (a.remember IS NOT FALSE OR dropped < 1000)
    ORDER BY p.due_at LIMIT p_limit;
END
$$;

-- indexer FUNCTION tenant_lexeme_keys(uuid, tsvector)
CREATE FUNCTION indexer.tenant_lexeme_keys(p_tenant uuid, p_terms tsvector) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN CASE WHEN (octet_length(array_to_string(tsvector_to_array(p_terms), ''::text)) <= 1900) THEN array_to_tsvector(array_remove(string_to_array(("left"(md5((p_tenant)::text), 8) || array_to_string(tsvector_to_array(p_terms), (''::text || "left"(md5((p_tenant)::text), 8)))), ''::text), ''::text)) ELSE indexer.tenant_terms_one_by_one("left"(md5((p_tenant)::text), 8), tsvector_to_array(p_terms)) END;

-- indexer FUNCTION tenant_span(uuid)
CREATE FUNCTION indexer.tenant_span(p_tenant uuid, OUT oldest timestamp with time zone, OUT newest timestamp with time zone) RETURNS record
    LANGUAGE plpgsql STABLE
    SET search_path TO 'indexer', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
BEGIN
    oldest := (SELECT m.occurred_at FROM indexer.messages m WHERE m.tenant_id = p_tenant ORDER BY m.occurred_at LIMIT 1);
    newest := (SELECT m.occurred_at FROM indexer.messages m WHERE m.tenant_id = p_tenant ORDER BY m.occurred_at DESC LIMIT 1);
END
$$;

-- indexer FUNCTION tenant_term_keys(text, text)
CREATE FUNCTION indexer.tenant_term_keys(p_prefix text, p_lexeme text) RETURNS text[]
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN array_remove(string_to_array((p_prefix || CASE WHEN (octet_length(p_lexeme) > 1900) THEN ('md5:'::text || md5(p_lexeme)) ELSE p_lexeme END), ''::text), ''::text);

-- indexer FUNCTION tenant_terms(uuid, tsvector)
CREATE FUNCTION indexer.tenant_terms(p_tenant uuid, p_terms tsvector) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN indexer.tenant_lexeme_keys(p_tenant, ts_delete(p_terms, tsvector_to_array(ts_filter(p_terms, '{c}'::"char"[]))));

-- indexer FUNCTION tenant_terms_one_by_one(text, text[])
CREATE FUNCTION indexer.tenant_terms_one_by_one(p_prefix text, p_lexemes text[]) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN array_to_tsvector(ARRAY(SELECT DISTINCT key.key FROM unnest(tenant_terms_one_by_one.p_lexemes) lexeme(lexeme), LATERAL unnest(indexer.tenant_term_keys(tenant_terms_one_by_one.p_prefix, lexeme.lexeme)) key(key)));

-- indexer FUNCTION tenant_terms_query(uuid, tsquery)
CREATE FUNCTION indexer.tenant_terms_query(p_tenant uuid, p_query tsquery) RETURNS tsquery
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path TO 'indexer', 'pg_temp'
    AS $_$
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
$_$;

-- indexer FUNCTION term_bits(tsvector)
CREATE FUNCTION indexer.term_bits(p_terms tsvector) RETURNS bit
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN (SELECT COALESCE(bit_or(set_bit((repeat('0'::text, 512))::bit(512), indexer.lexeme_bit(lexeme.lexeme), 1)), (repeat('0'::text, 512))::bit(512)) AS "coalesce" FROM unnest(tsvector_to_array(term_bits.p_terms)) lexeme(lexeme));

-- indexer INDEX memory_chunk_keys_terms
CREATE INDEX memory_chunk_keys_terms ON indexer.memory_chunk_keys USING gin (indexer.tenant_terms(tenant_id, lexemes)) WITH (fastupdate=off);

-- indexer INDEX memory_chunk_vectors_agent
CREATE INDEX memory_chunk_vectors_agent ON indexer.memory_chunk_vectors USING btree (tenant_id, agent_id, model);

-- indexer INDEX memory_chunks_agent
CREATE INDEX memory_chunks_agent ON indexer.memory_chunks USING btree (tenant_id, agent_id, source);

-- indexer INDEX memory_chunks_hash
CREATE INDEX memory_chunks_hash ON indexer.memory_chunks USING btree (tenant_id, content_hash);

-- indexer INDEX memory_chunks_hnsw_1024
CREATE INDEX memory_chunks_hnsw_1024 ON indexer.memory_chunks USING hnsw (((embedding)::public.vector(1024)) public.vector_cosine_ops) WHERE (dims = 1024);

-- indexer INDEX memory_chunks_hnsw_1536
CREATE INDEX memory_chunks_hnsw_1536 ON indexer.memory_chunks USING hnsw (((embedding)::public.vector(1536)) public.vector_cosine_ops) WHERE (dims = 1536);

-- indexer INDEX memory_chunks_hnsw_384
CREATE INDEX memory_chunks_hnsw_384 ON indexer.memory_chunks USING hnsw (((embedding)::public.vector(384)) public.vector_cosine_ops) WHERE (dims = 384);

-- indexer INDEX memory_chunks_hnsw_512
CREATE INDEX memory_chunks_hnsw_512 ON indexer.memory_chunks USING hnsw (((embedding)::public.vector(512)) public.vector_cosine_ops) WHERE (dims = 512);

-- indexer INDEX memory_chunks_hnsw_768
CREATE INDEX memory_chunks_hnsw_768 ON indexer.memory_chunks USING hnsw (((embedding)::public.vector(768)) public.vector_cosine_ops) WHERE (dims = 768);

-- indexer INDEX memory_chunks_month_day
CREATE INDEX memory_chunks_month_day ON indexer.memory_chunks USING btree (tenant_id, agent_id, indexer.memory_month_day(dated, occurred_at), occurred_at, start_line);

-- indexer INDEX memory_chunks_path
CREATE INDEX memory_chunks_path ON indexer.memory_chunks USING btree (tenant_id, agent_id, path) WHERE (path IS NOT NULL);

-- indexer INDEX memory_chunks_recent
CREATE INDEX memory_chunks_recent ON indexer.memory_chunks USING btree (tenant_id, agent_id, occurred_at DESC NULLS LAST, chunk_id) INCLUDE (source, session_key, term_bits);

-- indexer INDEX memory_chunks_session
CREATE INDEX memory_chunks_session ON indexer.memory_chunks USING btree (tenant_id, session_id, start_line) WHERE (session_id IS NOT NULL);

-- indexer INDEX memory_chunks_stale
CREATE INDEX memory_chunks_stale ON indexer.memory_chunks USING btree (model);

-- indexer INDEX memory_chunks_status
CREATE INDEX memory_chunks_status ON indexer.memory_chunks USING btree (tenant_id, agent_id, path) INCLUDE (source, model, indexed_at);

-- indexer INDEX memory_pending_due
CREATE INDEX memory_pending_due ON indexer.memory_pending USING btree (due_at);

-- indexer INDEX memory_turns_message
CREATE UNIQUE INDEX memory_turns_message ON indexer.memory_turns USING btree (tenant_id, message_id);

-- indexer INDEX memory_turns_model
CREATE INDEX memory_turns_model ON indexer.memory_turns USING btree (tenant_id, model) WHERE (model IS NOT NULL);

-- indexer INDEX memory_turns_stale
CREATE INDEX memory_turns_stale ON indexer.memory_turns USING btree (model) WHERE (model IS NOT NULL);

-- indexer INDEX messages_session
CREATE INDEX messages_session ON indexer.messages USING btree (tenant_id, session_id, "position");

-- indexer INDEX messages_tenant_recent
CREATE INDEX messages_tenant_recent ON indexer.messages USING btree (tenant_id, occurred_at DESC, message_id);

-- indexer INDEX messages_tenant_terms
CREATE INDEX messages_tenant_terms ON indexer.messages USING gin (indexer.tenant_terms(tenant_id, terms)) WITH (fastupdate='on', gin_pending_list_limit='256');

-- indexer POLICY memory_agents tenant_batch
CREATE POLICY tenant_batch ON indexer.memory_agents TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- indexer POLICY memory_agents tenant_isolation
CREATE POLICY tenant_isolation ON indexer.memory_agents USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- indexer POLICY memory_chunk_keys tenant_batch
CREATE POLICY tenant_batch ON indexer.memory_chunk_keys TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- indexer POLICY memory_chunk_keys tenant_isolation
CREATE POLICY tenant_isolation ON indexer.memory_chunk_keys USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- indexer POLICY memory_chunk_vectors tenant_batch
CREATE POLICY tenant_batch ON indexer.memory_chunk_vectors TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- indexer POLICY memory_chunk_vectors tenant_isolation
CREATE POLICY tenant_isolation ON indexer.memory_chunk_vectors USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- indexer POLICY memory_chunks tenant_batch
CREATE POLICY tenant_batch ON indexer.memory_chunks TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- indexer POLICY memory_chunks tenant_isolation
CREATE POLICY tenant_isolation ON indexer.memory_chunks USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- indexer POLICY memory_counts tenant_batch
CREATE POLICY tenant_batch ON indexer.memory_counts TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- indexer POLICY memory_counts tenant_isolation
CREATE POLICY tenant_isolation ON indexer.memory_counts USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- indexer POLICY memory_pending tenant_batch
CREATE POLICY tenant_batch ON indexer.memory_pending TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- indexer POLICY memory_pending tenant_isolation
CREATE POLICY tenant_isolation ON indexer.memory_pending USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- indexer POLICY memory_progress tenant_batch
CREATE POLICY tenant_batch ON indexer.memory_progress TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- indexer POLICY memory_progress tenant_isolation
CREATE POLICY tenant_isolation ON indexer.memory_progress USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- indexer POLICY memory_turns tenant_batch
CREATE POLICY tenant_batch ON indexer.memory_turns TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- indexer POLICY memory_turns tenant_isolation
CREATE POLICY tenant_isolation ON indexer.memory_turns USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- indexer POLICY message_counts tenant_batch
CREATE POLICY tenant_batch ON indexer.message_counts TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- indexer POLICY message_counts tenant_isolation
CREATE POLICY tenant_isolation ON indexer.message_counts USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- indexer POLICY messages tenant_batch
CREATE POLICY tenant_batch ON indexer.messages TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- indexer POLICY messages tenant_isolation
CREATE POLICY tenant_isolation ON indexer.messages USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- indexer POLICY progress tenant_batch
CREATE POLICY tenant_batch ON indexer.progress TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- indexer POLICY progress tenant_isolation
CREATE POLICY tenant_isolation ON indexer.progress USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- indexer ROW SECURITY memory_agents
ALTER TABLE indexer.memory_agents ENABLE ROW LEVEL SECURITY;

-- indexer ROW SECURITY memory_chunk_keys
ALTER TABLE indexer.memory_chunk_keys ENABLE ROW LEVEL SECURITY;

-- indexer ROW SECURITY memory_chunk_vectors
ALTER TABLE indexer.memory_chunk_vectors ENABLE ROW LEVEL SECURITY;

-- indexer ROW SECURITY memory_chunks
ALTER TABLE indexer.memory_chunks ENABLE ROW LEVEL SECURITY;

-- indexer ROW SECURITY memory_counts
ALTER TABLE indexer.memory_counts ENABLE ROW LEVEL SECURITY;

-- indexer ROW SECURITY memory_pending
ALTER TABLE indexer.memory_pending ENABLE ROW LEVEL SECURITY;

-- indexer ROW SECURITY memory_progress
ALTER TABLE indexer.memory_progress ENABLE ROW LEVEL SECURITY;

-- indexer ROW SECURITY memory_turns
ALTER TABLE indexer.memory_turns ENABLE ROW LEVEL SECURITY;

-- indexer ROW SECURITY message_counts
ALTER TABLE indexer.message_counts ENABLE ROW LEVEL SECURITY;

-- indexer ROW SECURITY messages
ALTER TABLE indexer.messages ENABLE ROW LEVEL SECURITY;

-- indexer ROW SECURITY progress
ALTER TABLE indexer.progress ENABLE ROW LEVEL SECURITY;

-- indexer TABLE embedding_models
CREATE TABLE indexer.embedding_models (
    model text NOT NULL,
    started_at timestamp with time zone NOT NULL,
    seen_at timestamp with time zone NOT NULL
);

-- indexer TABLE memory_agents
CREATE TABLE indexer.memory_agents (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    remember boolean NOT NULL,
    config_version integer NOT NULL
);

-- indexer TABLE memory_chunk_keys
CREATE TABLE indexer.memory_chunk_keys (
    tenant_id uuid NOT NULL,
    chunk_id uuid NOT NULL,
    agent_id text NOT NULL,
    source text NOT NULL,
    session_key text,
    occurred_at timestamp with time zone,
    lexemes tsvector NOT NULL
);

-- indexer TABLE memory_chunk_vectors
CREATE TABLE indexer.memory_chunk_vectors (
    tenant_id uuid NOT NULL,
    chunk_id uuid NOT NULL,
    agent_id text NOT NULL,
    source text NOT NULL,
    session_key text,
    path text,
    model text NOT NULL,
    embedding public.vector NOT NULL
);
ALTER TABLE ONLY indexer.memory_chunk_vectors ALTER COLUMN embedding SET STORAGE MAIN;

-- indexer TABLE memory_chunks
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
    context text,
    CONSTRAINT memory_chunks_check CHECK (((source = 'memory'::text) = (path IS NOT NULL))),
    CONSTRAINT memory_chunks_check1 CHECK ((((embedding IS NULL) = (model IS NULL)) AND ((embedding IS NULL) = (dims IS NULL)))),
    CONSTRAINT memory_chunks_source_check CHECK ((source = ANY (ARRAY['memory'::text, 'sessions'::text])))
);
ALTER TABLE ONLY indexer.memory_chunks ALTER COLUMN terms SET STORAGE MAIN;

-- indexer TABLE memory_counts
CREATE TABLE indexer.memory_counts (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    chunks bigint DEFAULT 0 NOT NULL
);
ALTER TABLE ONLY indexer.memory_counts FORCE ROW LEVEL SECURITY;

-- indexer TABLE memory_pending
CREATE TABLE indexer.memory_pending (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    session_id uuid NOT NULL,
    session_key text NOT NULL,
    first_at timestamp with time zone DEFAULT now() NOT NULL,
    first_seq bigint,
    due_at timestamp with time zone NOT NULL
);

-- indexer TABLE memory_progress
CREATE TABLE indexer.memory_progress (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    ingest_seq bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE ONLY indexer.memory_progress FORCE ROW LEVEL SECURITY;

-- indexer TABLE memory_turns
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
    embedding public.vector
);

-- indexer TABLE message_counts
CREATE TABLE indexer.message_counts (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    messages bigint DEFAULT 0 NOT NULL
);
ALTER TABLE ONLY indexer.message_counts FORCE ROW LEVEL SECURITY;

-- indexer TABLE messages
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
    sender_name text
);

-- indexer TABLE progress
CREATE TABLE indexer.progress (
    tenant_id uuid NOT NULL,
    ingest_seq bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    agent_id text NOT NULL
);
ALTER TABLE ONLY indexer.progress FORCE ROW LEVEL SECURITY;

-- indexer TRIGGER memory_chunks memory_chunk_keys_deleted
CREATE TRIGGER memory_chunk_keys_deleted AFTER DELETE ON indexer.memory_chunks REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION indexer.memory_chunk_keys_deleted();

-- indexer TRIGGER memory_chunks memory_chunk_keys_inserted
CREATE TRIGGER memory_chunk_keys_inserted AFTER INSERT ON indexer.memory_chunks REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION indexer.memory_chunk_keys_inserted();

-- indexer TRIGGER memory_chunks memory_chunk_keys_updated
CREATE TRIGGER memory_chunk_keys_updated AFTER UPDATE OF tenant_id, chunk_id, agent_id, source, session_key, occurred_at, terms ON indexer.memory_chunks FOR EACH ROW EXECUTE FUNCTION indexer.memory_chunk_keys_updated();

-- indexer TRIGGER memory_chunks memory_chunk_vectors_deleted
CREATE TRIGGER memory_chunk_vectors_deleted AFTER DELETE ON indexer.memory_chunks REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION indexer.memory_chunk_vectors_deleted();

-- indexer TRIGGER memory_chunks memory_chunk_vectors_inserted
CREATE TRIGGER memory_chunk_vectors_inserted AFTER INSERT ON indexer.memory_chunks REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION indexer.memory_chunk_vectors_inserted();

-- indexer TRIGGER memory_chunks memory_chunk_vectors_updated
CREATE TRIGGER memory_chunk_vectors_updated AFTER UPDATE OF tenant_id, chunk_id, agent_id, source, session_key, path, model, embedding ON indexer.memory_chunks FOR EACH ROW EXECUTE FUNCTION indexer.memory_chunk_vectors_updated();

-- indexer TRIGGER messages messages_counted_in
CREATE TRIGGER messages_counted_in AFTER INSERT ON indexer.messages REFERENCING NEW TABLE AS counted_rows FOR EACH STATEMENT EXECUTE FUNCTION indexer.count_messages();

-- indexer TRIGGER messages messages_counted_out
CREATE TRIGGER messages_counted_out AFTER DELETE ON indexer.messages REFERENCING OLD TABLE AS counted_rows FOR EACH STATEMENT EXECUTE FUNCTION indexer.count_messages();

-- indexer TYPE message_row
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

-- indexer TYPE turn_row
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

-- ingest ACL COLUMN api_keys.expires_at
GRANT UPDATE(expires_at) ON TABLE ingest.api_keys TO cairn_app;

-- ingest ACL COLUMN api_keys.last_used_at
GRANT UPDATE(last_used_at) ON TABLE ingest.api_keys TO cairn_app;

-- ingest ACL COLUMN api_keys.revoked_at
GRANT UPDATE(revoked_at) ON TABLE ingest.api_keys TO cairn_app;

-- ingest ACL FUNCTION audit_entries(p_tenant_id uuid, p_since timestamp with time zone, p_limit integer)
REVOKE ALL ON FUNCTION ingest.audit_entries(p_tenant_id uuid, p_since timestamp with time zone, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION ingest.audit_entries(p_tenant_id uuid, p_since timestamp with time zone, p_limit integer) TO cairn_app;

-- ingest ACL FUNCTION authenticate(p_key_hash bytea)
REVOKE ALL ON FUNCTION ingest.authenticate(p_key_hash bytea) FROM PUBLIC;
GRANT ALL ON FUNCTION ingest.authenticate(p_key_hash bytea) TO cairn_app;

-- ingest ACL FUNCTION create_tenant(p_tenant_id uuid, p_name text, p_key_hash bytea, p_key_prefix text)
REVOKE ALL ON FUNCTION ingest.create_tenant(p_tenant_id uuid, p_name text, p_key_hash bytea, p_key_prefix text) FROM PUBLIC;
GRANT ALL ON FUNCTION ingest.create_tenant(p_tenant_id uuid, p_name text, p_key_hash bytea, p_key_prefix text) TO cairn_app;

-- ingest ACL FUNCTION key_grant(p_key_hash bytea)
REVOKE ALL ON FUNCTION ingest.key_grant(p_key_hash bytea) FROM PUBLIC;
GRANT ALL ON FUNCTION ingest.key_grant(p_key_hash bytea) TO cairn_app;

-- ingest ACL TABLE agent_configs
GRANT SELECT,INSERT,UPDATE ON TABLE ingest.agent_configs TO cairn_app;

-- ingest ACL TABLE api_keys
GRANT SELECT,INSERT ON TABLE ingest.api_keys TO cairn_app;

-- ingest ACL TABLE audit_log
GRANT INSERT ON TABLE ingest.audit_log TO cairn_app;

-- ingest ACL TABLE tenants
GRANT SELECT ON TABLE ingest.tenants TO cairn_app;

-- ingest CONSTRAINT agent_configs agent_configs_pkey
ALTER TABLE ONLY ingest.agent_configs
    ADD CONSTRAINT agent_configs_pkey PRIMARY KEY (tenant_id, agent_id);

-- ingest CONSTRAINT api_keys api_keys_key_id_key
ALTER TABLE ONLY ingest.api_keys
    ADD CONSTRAINT api_keys_key_id_key UNIQUE (key_id);

-- ingest CONSTRAINT api_keys api_keys_pkey
ALTER TABLE ONLY ingest.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (key_hash);

-- ingest CONSTRAINT audit_log audit_log_pkey
ALTER TABLE ONLY ingest.audit_log
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (entry_id);

-- ingest CONSTRAINT tenants tenants_pkey
ALTER TABLE ONLY ingest.tenants
    ADD CONSTRAINT tenants_pkey PRIMARY KEY (tenant_id);

-- ingest FK CONSTRAINT api_keys api_keys_tenant_id_fkey
ALTER TABLE ONLY ingest.api_keys
    ADD CONSTRAINT api_keys_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES ingest.tenants(tenant_id);

-- ingest FUNCTION audit_entries(uuid, timestamp with time zone, integer)
CREATE FUNCTION ingest.audit_entries(p_tenant_id uuid, p_since timestamp with time zone, p_limit integer) RETURNS TABLE(at timestamp with time zone, actor text, tenant_id uuid, action text, target text, client text)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'ingest', 'pg_temp'
    AS $$
    SELECT a.at, a.actor, a.tenant_id, a.action, a.target, a.client FROM ingest.audit_log a
    WHERE (p_tenant_id IS NULL OR a.tenant_id = p_tenant_id) AND (p_since IS NULL OR a.at >= p_since)
    ORDER BY a.at, a.entry_id
    LIMIT p_limit
$$;

-- ingest FUNCTION authenticate(bytea)
CREATE FUNCTION ingest.authenticate(p_key_hash bytea) RETURNS uuid
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'ingest', 'pg_temp'
    AS $$
    SELECT tenant_id FROM ingest.api_keys WHERE key_hash = p_key_hash AND revoked_at IS NULL
      AND (expires_at IS NULL OR expires_at > now())
$$;

-- ingest FUNCTION create_tenant(uuid, text, bytea, text)
CREATE FUNCTION ingest.create_tenant(p_tenant_id uuid, p_name text, p_key_hash bytea, p_key_prefix text) RETURNS uuid
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'ingest', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO ingest.tenants (tenant_id, name) VALUES (p_tenant_id, p_name);
    INSERT INTO ingest.api_keys (key_hash, tenant_id, key_prefix) VALUES (p_key_hash, p_tenant_id, p_key_prefix);
    RETURN p_tenant_id;
END
$$;

-- ingest FUNCTION key_grant(bytea)
CREATE FUNCTION ingest.key_grant(p_key_hash bytea) RETURNS TABLE(tenant_id uuid, key_id uuid, scopes text[], agents text[], expires_at timestamp with time zone)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'ingest', 'pg_temp'
    AS $$
    SELECT k.tenant_id, k.key_id, k.scopes, k.agents, k.expires_at FROM ingest.api_keys k
    WHERE k.key_hash = p_key_hash AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())
$$;

-- ingest INDEX api_keys_tenant
CREATE INDEX api_keys_tenant ON ingest.api_keys USING btree (tenant_id);

-- ingest INDEX audit_log_at
CREATE INDEX audit_log_at ON ingest.audit_log USING btree (at);

-- ingest INDEX audit_log_tenant_at
CREATE INDEX audit_log_tenant_at ON ingest.audit_log USING btree (tenant_id, at);

-- ingest POLICY agent_configs tenant_isolation
CREATE POLICY tenant_isolation ON ingest.agent_configs USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- ingest POLICY api_keys tenant_isolation
CREATE POLICY tenant_isolation ON ingest.api_keys USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- ingest POLICY audit_log tenant_isolation
CREATE POLICY tenant_isolation ON ingest.audit_log USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- ingest POLICY tenants tenant_isolation
CREATE POLICY tenant_isolation ON ingest.tenants USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- ingest ROW SECURITY agent_configs
ALTER TABLE ingest.agent_configs ENABLE ROW LEVEL SECURITY;

-- ingest ROW SECURITY api_keys
ALTER TABLE ingest.api_keys ENABLE ROW LEVEL SECURITY;

-- ingest ROW SECURITY audit_log
ALTER TABLE ingest.audit_log ENABLE ROW LEVEL SECURITY;

-- ingest ROW SECURITY tenants
ALTER TABLE ingest.tenants ENABLE ROW LEVEL SECURITY;

-- ingest TABLE agent_configs
CREATE TABLE ingest.agent_configs (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    config jsonb NOT NULL,
    version integer NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT agent_configs_version_check CHECK ((version >= 1))
);
ALTER TABLE ONLY ingest.agent_configs FORCE ROW LEVEL SECURITY;

-- ingest TABLE api_keys
CREATE TABLE ingest.api_keys (
    key_hash bytea NOT NULL,
    tenant_id uuid NOT NULL,
    key_prefix text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    key_id uuid DEFAULT gen_random_uuid() NOT NULL,
    name text DEFAULT 'default'::text NOT NULL,
    scopes text[] DEFAULT ARRAY['write'::text, 'read'::text, 'memory:write'::text, 'admin'::text] NOT NULL,
    agents text[],
    expires_at timestamp with time zone,
    last_used_at timestamp with time zone,
    CONSTRAINT api_keys_agents_check CHECK (((agents IS NULL) OR (cardinality(agents) >= 1))),
    CONSTRAINT api_keys_name_check CHECK (((length(name) >= 1) AND (length(name) <= 200))),
    CONSTRAINT api_keys_scopes_check CHECK (((cardinality(scopes) >= 1) AND (scopes <@ ARRAY['write'::text, 'read'::text, 'memory:write'::text, 'admin'::text])))
);

-- ingest TABLE audit_log
CREATE TABLE ingest.audit_log (
    entry_id uuid DEFAULT gen_random_uuid() NOT NULL,
    at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    actor text NOT NULL,
    tenant_id uuid NOT NULL,
    action text NOT NULL,
    target text,
    client text
);

-- ingest TABLE tenants
CREATE TABLE ingest.tenants (
    tenant_id uuid NOT NULL,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tenants_name_check CHECK (((length(name) >= 1) AND (length(name) <= 200)))
);

-- recall ACL FUNCTION forget_traces(p_before timestamp with time zone, p_limit integer)
REVOKE ALL ON FUNCTION recall.forget_traces(p_before timestamp with time zone, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION recall.forget_traces(p_before timestamp with time zone, p_limit integer) TO cairn_app;

-- recall ACL TABLE traces
GRANT SELECT,INSERT ON TABLE recall.traces TO cairn_app;

-- recall CONSTRAINT traces traces_pkey
ALTER TABLE ONLY recall.traces
    ADD CONSTRAINT traces_pkey PRIMARY KEY (tenant_id, trace_id);

-- recall FUNCTION forget_traces(timestamp with time zone, integer)
CREATE FUNCTION recall.forget_traces(p_before timestamp with time zone, p_limit integer) RETURNS integer
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'recall'
    AS $$
    WITH old AS (
        SELECT tenant_id, trace_id FROM recall.traces WHERE created_at < p_before LIMIT p_limit
    ), gone AS (
        DELETE FROM recall.traces t USING old WHERE t.tenant_id = old.tenant_id AND t.trace_id = old.trace_id
        RETURNING 1
    )
    SELECT count(*)::int FROM gone
$$;

-- recall INDEX traces_by_age
CREATE INDEX traces_by_age ON recall.traces USING brin (created_at);

-- recall INDEX traces_of_session
CREATE INDEX traces_of_session ON recall.traces USING btree (tenant_id, session_key, created_at DESC);

-- recall POLICY traces delete_old_traces
CREATE POLICY delete_old_traces ON recall.traces FOR DELETE TO cairn_owner USING ((created_at < (now() - '1 day'::interval)));

-- recall POLICY traces sweep_old_traces
CREATE POLICY sweep_old_traces ON recall.traces FOR SELECT TO cairn_owner USING ((created_at < (now() - '1 day'::interval)));

-- recall POLICY traces tenant_isolation
CREATE POLICY tenant_isolation ON recall.traces USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- recall ROW SECURITY traces
ALTER TABLE recall.traces ENABLE ROW LEVEL SECURITY;

-- recall TABLE traces
CREATE TABLE recall.traces (
    tenant_id uuid NOT NULL,
    trace_id uuid NOT NULL,
    agent_id text NOT NULL,
    session_key text NOT NULL,
    query text NOT NULL,
    lane smallint,
    outcome text NOT NULL,
    reason text,
    candidates jsonb DEFAULT '[]'::jsonb NOT NULL,
    injected jsonb DEFAULT '[]'::jsonb NOT NULL,
    timings_ms jsonb DEFAULT '{}'::jsonb NOT NULL,
    model text,
    tokens jsonb DEFAULT '{}'::jsonb NOT NULL,
    fallbacks text[] DEFAULT '{}'::text[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE ONLY recall.traces FORCE ROW LEVEL SECURITY;

-- session ACL FUNCTION open_many(p_tenants uuid[], p_agents text[], p_keys text[], p_new_ids uuid[], p_chat_types text[], p_channels text[], p_ext_tenants uuid[], p_ext_channels text[], p_ext_ids text[])
GRANT ALL ON FUNCTION session.open_many(p_tenants uuid[], p_agents text[], p_keys text[], p_new_ids uuid[], p_chat_types text[], p_channels text[], p_ext_tenants uuid[], p_ext_channels text[], p_ext_ids text[]) TO cairn_app;

-- session ACL FUNCTION sweep_lifecycle(p_dormant_after interval, p_archive_after interval, p_tenant uuid)
REVOKE ALL ON FUNCTION session.sweep_lifecycle(p_dormant_after interval, p_archive_after interval, p_tenant uuid) FROM PUBLIC;
GRANT ALL ON FUNCTION session.sweep_lifecycle(p_dormant_after interval, p_archive_after interval, p_tenant uuid) TO cairn_app;

-- session ACL TABLE agent_settings
GRANT SELECT,INSERT,UPDATE ON TABLE session.agent_settings TO cairn_app;

-- session ACL TABLE entries
GRANT SELECT,INSERT,UPDATE ON TABLE session.entries TO cairn_app;

-- session ACL TABLE key_sessions
GRANT SELECT,INSERT ON TABLE session.key_sessions TO cairn_app;

-- session ACL TABLE sessions
GRANT SELECT,INSERT,UPDATE ON TABLE session.sessions TO cairn_app;

-- session CONSTRAINT agent_settings agent_settings_pkey
ALTER TABLE ONLY session.agent_settings
    ADD CONSTRAINT agent_settings_pkey PRIMARY KEY (tenant_id, agent_id);

-- session CONSTRAINT entries entries_pkey
ALTER TABLE ONLY session.entries
    ADD CONSTRAINT entries_pkey PRIMARY KEY (tenant_id, session_id, "position");

-- session CONSTRAINT key_sessions key_sessions_pkey
ALTER TABLE ONLY session.key_sessions
    ADD CONSTRAINT key_sessions_pkey PRIMARY KEY (tenant_id, session_id);

-- session CONSTRAINT sessions sessions_pkey
ALTER TABLE ONLY session.sessions
    ADD CONSTRAINT sessions_pkey PRIMARY KEY (tenant_id, agent_id, session_key);

-- session CONSTRAINT sessions sessions_tenant_id_session_id_key
ALTER TABLE ONLY session.sessions
    ADD CONSTRAINT sessions_tenant_id_session_id_key UNIQUE (tenant_id, session_id);

-- session FUNCTION open_many(uuid[], text[], text[], uuid[], text[], text[], uuid[], text[], text[])
CREATE FUNCTION session.open_many(p_tenants uuid[], p_agents text[], p_keys text[], p_new_ids uuid[], p_chat_types text[], p_channels text[], p_ext_tenants uuid[], p_ext_channels text[], p_ext_ids text[]) RETURNS TABLE(tenant_id uuid, agent_id text, session_key text, created boolean, session_id uuid, chat_type text, last_position integer, reset_index integer, window_tokens bigint, window_bytes bigint, compaction_flagged boolean, compaction_cycle integer, last_activity_at timestamp with time zone, context_window integer, reset_policy jsonb, reset_by_type jsonb, compaction jsonb, channel text, external_id text)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    v_created uuid[];
BEGIN
    IF cardinality(p_keys) > 0 THEN
        WITH made AS (
            INSERT INTO session.sessions (tenant_id, agent_id, session_key, session_id, chat_type, channel)
            SELECT * FROM unnest(p_tenants, p_agents, p_keys, p_new_ids, p_chat_types, p_channels)
                AS k(tenant_id, agent_id, session_key, session_id, chat_type, channel)
            ON CONFLICT (tenant_id, agent_id, session_key) DO NOTHING
            RETURNING tenant_id, agent_id, session_key, session_id
        ), remembered AS (
            INSERT INTO session.key_sessions (tenant_id, agent_id, session_key, session_id)
            SELECT * FROM made
            ON CONFLICT DO NOTHING
        )
        SELECT coalesce(array_agg(made.session_id), '{}') INTO v_created FROM made;
        -- locked in key order, so two writers that ever meet (a partition changing hands) cannot deadlock
        RETURN QUERY
        SELECT s.tenant_id, s.agent_id, s.session_key, s.session_id = ANY(v_created), s.session_id, s.chat_type,
            s.last_position, s.reset_index, s.window_tokens, s.window_bytes, s.compaction_flagged,
            s.compaction_cycle, s.last_activity_at, a.context_window, a.reset_policy, a.reset_by_type,
            a.compaction, NULL::text, NULL::text
        FROM session.sessions s
        JOIN unnest(p_tenants, p_agents, p_keys) AS k(tenant_id, agent_id, session_key)
            USING (tenant_id, agent_id, session_key)
        LEFT JOIN session.agent_settings a ON a.tenant_id = s.tenant_id AND a.agent_id = s.agent_id
        ORDER BY s.tenant_id, s.agent_id, s.session_key
        FOR UPDATE OF s;
    END IF;
    IF cardinality(p_ext_ids) > 0 THEN
        RETURN QUERY
        SELECT e.tenant_id, NULL::text, NULL::text, NULL::boolean, NULL::uuid, NULL::text, NULL::integer,
            NULL::integer, NULL::bigint, NULL::bigint, NULL::boolean, NULL::integer, NULL::timestamptz,
            NULL::integer, NULL::jsonb, NULL::jsonb, NULL::jsonb, e.channel, e.external_id
        FROM session.entries e
        WHERE (e.tenant_id, e.channel, e.external_id) IN (SELECT * FROM unnest(p_ext_tenants, p_ext_channels, p_ext_ids))
          AND e.external_id IS NOT NULL;
    END IF;
END
$$;

-- session FUNCTION sweep_lifecycle(interval, interval, uuid)
CREATE FUNCTION session.sweep_lifecycle(p_dormant_after interval, p_archive_after interval, p_tenant uuid DEFAULT NULL::uuid) RETURNS TABLE(dormant bigint, archived bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'session', 'pg_temp'
    AS $$
DECLARE
    t uuid;
    n bigint;
BEGIN
    dormant := 0;
    archived := 0;
    FOR t IN SELECT tenant_id FROM ingest.tenants WHERE p_tenant IS NULL OR tenant_id = p_tenant LOOP
        PERFORM set_config('cairn.tenant_id', t::text, true);
        UPDATE session.sessions s SET status = 'archived'
        FROM (
            SELECT d.agent_id, coalesce(a.archive_after, p_archive_after) AS after
            FROM (SELECT DISTINCT agent_id FROM session.sessions WHERE tenant_id = t AND status <> 'archived') d
            LEFT JOIN session.agent_settings a ON a.tenant_id = t AND a.agent_id = d.agent_id
        ) r
        WHERE s.tenant_id = t AND s.agent_id = r.agent_id AND s.status <> 'archived' AND s.updated_at < now() - r.after;
        GET DIAGNOSTICS n = ROW_COUNT;
        archived := archived + n;
        UPDATE session.sessions s SET status = 'dormant'
        FROM (
            SELECT d.agent_id, coalesce(a.dormant_after, p_dormant_after) AS after
            FROM (SELECT DISTINCT agent_id FROM session.sessions WHERE tenant_id = t AND status = 'active') d
            LEFT JOIN session.agent_settings a ON a.tenant_id = t AND a.agent_id = d.agent_id
        ) r
        WHERE s.tenant_id = t AND s.agent_id = r.agent_id AND s.status = 'active' AND s.updated_at < now() - r.after;
        GET DIAGNOSTICS n = ROW_COUNT;
        dormant := dormant + n;
    END LOOP;
    PERFORM set_config('cairn.tenant_id', '', true);
    RETURN NEXT;
END
$$;

-- session INDEX entries_external_id
CREATE UNIQUE INDEX entries_external_id ON session.entries USING btree (tenant_id, channel, external_id) WHERE (external_id IS NOT NULL);

-- session INDEX entries_message_id
CREATE UNIQUE INDEX entries_message_id ON session.entries USING btree (tenant_id, message_id);

-- session INDEX entries_window
CREATE INDEX entries_window ON session.entries USING btree (tenant_id, session_id, reset_index, "position");

-- session INDEX key_sessions_key
CREATE INDEX key_sessions_key ON session.key_sessions USING btree (tenant_id, agent_id, session_key, started_at);

-- session INDEX sessions_lifecycle
CREATE INDEX sessions_lifecycle ON session.sessions USING btree (tenant_id, status, updated_at);

-- session INDEX sessions_recent
CREATE INDEX sessions_recent ON session.sessions USING btree (tenant_id, agent_id, updated_at DESC, session_key DESC);

-- session POLICY agent_settings tenant_batch
CREATE POLICY tenant_batch ON session.agent_settings TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- session POLICY agent_settings tenant_isolation
CREATE POLICY tenant_isolation ON session.agent_settings USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- session POLICY entries tenant_batch
CREATE POLICY tenant_batch ON session.entries TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- session POLICY entries tenant_isolation
CREATE POLICY tenant_isolation ON session.entries USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- session POLICY key_sessions tenant_batch
CREATE POLICY tenant_batch ON session.key_sessions TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- session POLICY key_sessions tenant_isolation
CREATE POLICY tenant_isolation ON session.key_sessions USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- session POLICY sessions tenant_batch
CREATE POLICY tenant_batch ON session.sessions TO cairn_projector USING ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[]))) WITH CHECK ((tenant_id = ANY (( SELECT cairn.batch_tenants() AS batch_tenants)::uuid[])));

-- session POLICY sessions tenant_isolation
CREATE POLICY tenant_isolation ON session.sessions USING ((tenant_id = cairn.current_tenant())) WITH CHECK ((tenant_id = cairn.current_tenant()));

-- session ROW SECURITY agent_settings
ALTER TABLE session.agent_settings ENABLE ROW LEVEL SECURITY;

-- session ROW SECURITY entries
ALTER TABLE session.entries ENABLE ROW LEVEL SECURITY;

-- session ROW SECURITY key_sessions
ALTER TABLE session.key_sessions ENABLE ROW LEVEL SECURITY;

-- session ROW SECURITY sessions
ALTER TABLE session.sessions ENABLE ROW LEVEL SECURITY;

-- session TABLE agent_settings
CREATE TABLE session.agent_settings (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    context_window integer,
    reset_policy jsonb NOT NULL,
    config_version integer NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    reset_by_type jsonb DEFAULT '{}'::jsonb NOT NULL,
    dormant_after interval,
    archive_after interval,
    compaction jsonb DEFAULT '{}'::jsonb NOT NULL,
    CONSTRAINT agent_settings_context_window_check CHECK ((context_window >= 1000))
);
ALTER TABLE ONLY session.agent_settings FORCE ROW LEVEL SECURITY;

-- session TABLE entries
CREATE TABLE session.entries (
    tenant_id uuid NOT NULL,
    session_id uuid NOT NULL,
    "position" integer NOT NULL,
    kind text NOT NULL,
    message_id uuid NOT NULL,
    channel text NOT NULL,
    external_id text,
    role text,
    text text,
    sender_name text,
    peer_id text,
    reset_index integer NOT NULL,
    token_estimate integer DEFAULT 0 NOT NULL,
    occurred_at timestamp with time zone NOT NULL,
    recorded_at timestamp with time zone NOT NULL,
    ingest_seq bigint,
    CONSTRAINT entries_kind_check CHECK ((kind = ANY (ARRAY['message'::text, 'reset'::text])))
);
ALTER TABLE ONLY session.entries FORCE ROW LEVEL SECURITY;

-- session TABLE key_sessions
CREATE TABLE session.key_sessions (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    session_key text NOT NULL,
    session_id uuid NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE ONLY session.key_sessions FORCE ROW LEVEL SECURITY;

-- session TABLE sessions
CREATE TABLE session.sessions (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    session_key text NOT NULL,
    session_id uuid NOT NULL,
    chat_type text NOT NULL,
    channel text NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    parent_session_id uuid,
    last_position integer DEFAULT 0 NOT NULL,
    reset_index integer DEFAULT 0 NOT NULL,
    window_tokens bigint DEFAULT 0 NOT NULL,
    window_bytes bigint DEFAULT 0 NOT NULL,
    compaction_cycle integer DEFAULT 0 NOT NULL,
    compaction_flagged boolean DEFAULT false NOT NULL,
    message_count integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    last_activity_at timestamp with time zone,
    active_memory boolean DEFAULT true NOT NULL
);
ALTER TABLE ONLY session.sessions FORCE ROW LEVEL SECURITY;

-- session TYPE entry_row
CREATE TYPE session.entry_row AS (
	tenant_id uuid,
	session_id uuid,
	"position" integer,
	kind text,
	message_id uuid,
	channel text,
	external_id text,
	role text,
	text text,
	sender_name text,
	peer_id text,
	reset_index integer,
	token_estimate integer,
	occurred_at timestamp with time zone,
	recorded_at timestamp with time zone,
	ingest_seq bigint
);
