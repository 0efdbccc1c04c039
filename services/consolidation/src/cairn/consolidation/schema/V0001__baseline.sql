-- Consolidation's schema: memory documents, their versions, pending flushes and write outcomes.
-- The squash of migrations 0001-0151 (see tests/integration/schema/): today's schema in one file.

CREATE SCHEMA consolidation;
GRANT USAGE ON SCHEMA consolidation TO cairn_app;

CREATE TABLE consolidation.document_versions (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    path text NOT NULL,
    version integer NOT NULL,
    text text NOT NULL,
    change text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT document_versions_pkey PRIMARY KEY (tenant_id, agent_id, path, version)
);
SELECT cairn.isolate_by_tenant('consolidation.document_versions');

CREATE TABLE consolidation.documents (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    path text NOT NULL,
    version integer NOT NULL,
    text text NOT NULL,
    deleted boolean DEFAULT false NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT documents_pkey PRIMARY KEY (tenant_id, agent_id, path)
);
SELECT cairn.isolate_by_tenant('consolidation.documents');

-- A compaction cycle whose memory flush is due (the flush turn itself needs the LLM client).
CREATE TABLE consolidation.flushes_due (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    session_id uuid NOT NULL,
    cycle integer NOT NULL,
    session_key text NOT NULL,
    requested_at timestamp with time zone DEFAULT now() NOT NULL,
    done_at timestamp with time zone,
    CONSTRAINT flushes_due_pkey PRIMARY KEY (tenant_id, session_id, cycle)
);
SELECT cairn.isolate_by_tenant('consolidation.flushes_due');

-- What became of each memory write request (applied as a version, or why not), written by consolidation
-- in the same transaction as the document, so that ingest can answer the client's PUT, POST or DELETE
-- with the version or a 409/404/413 instead of a bare "accepted".
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
    CONSTRAINT write_outcomes_outcome_check CHECK ((outcome = ANY (ARRAY['applied'::text, 'unchanged'::text, 'conflict'::text, 'missing'::text, 'too_large'::text]))),
    CONSTRAINT write_outcomes_pkey PRIMARY KEY (tenant_id, request_id)
);
SELECT cairn.isolate_by_tenant('consolidation.write_outcomes');

GRANT SELECT,INSERT,UPDATE ON TABLE consolidation.document_versions TO cairn_app;
GRANT SELECT,INSERT,UPDATE ON TABLE consolidation.documents TO cairn_app;
GRANT SELECT,INSERT,UPDATE ON TABLE consolidation.flushes_due TO cairn_app;
GRANT SELECT,INSERT,DELETE ON TABLE consolidation.write_outcomes TO cairn_app;

CREATE INDEX write_outcomes_age ON consolidation.write_outcomes USING btree (tenant_id, decided_at);
