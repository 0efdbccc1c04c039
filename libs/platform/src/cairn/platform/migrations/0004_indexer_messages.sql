-- indexer owns the search projections. Full-text rows of user and assistant messages.
CREATE SCHEMA IF NOT EXISTS indexer;

CREATE TABLE indexer.messages (
    tenant_id   uuid        NOT NULL,
    agent_id    text        NOT NULL,
    message_id  uuid        NOT NULL,
    session_key text        NOT NULL,
    session_id  uuid        NOT NULL,
    position    int         NOT NULL,
    reset_index int         NOT NULL,
    role        text        NOT NULL,
    chat_type   text        NOT NULL,
    text        text        NOT NULL,
    terms       tsvector    NOT NULL,
    occurred_at timestamptz NOT NULL,
    ingest_seq  bigint,
    PRIMARY KEY (tenant_id, message_id)
);
CREATE INDEX messages_terms ON indexer.messages USING gin (terms);
CREATE INDEX messages_session ON indexer.messages (tenant_id, session_id, position);

-- How far the projection has got, per tenant, in ingest-stream sequence (read-your-writes).
CREATE TABLE indexer.progress (
    tenant_id  uuid        PRIMARY KEY,
    ingest_seq bigint      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

SELECT cairn.isolate_by_tenant('indexer.messages');
SELECT cairn.isolate_by_tenant('indexer.progress');

GRANT USAGE ON SCHEMA indexer TO cairn_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON indexer.messages, indexer.progress TO cairn_app;
