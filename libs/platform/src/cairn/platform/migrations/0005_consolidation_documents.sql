-- consolidation owns memory documents (every change a new version) and pending flushes.
CREATE SCHEMA IF NOT EXISTS consolidation;

CREATE TABLE consolidation.documents (
    tenant_id  uuid        NOT NULL,
    agent_id   text        NOT NULL,
    path       text        NOT NULL,
    version    int         NOT NULL,
    text       text        NOT NULL,
    deleted    boolean     NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, agent_id, path)
);

CREATE TABLE consolidation.document_versions (
    tenant_id  uuid        NOT NULL,
    agent_id   text        NOT NULL,
    path       text        NOT NULL,
    version    int         NOT NULL,
    text       text        NOT NULL,
    change     text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, agent_id, path, version)
);

-- A compaction cycle whose memory flush is due (the flush turn itself needs the LLM client).
CREATE TABLE consolidation.flushes_due (
    tenant_id    uuid        NOT NULL,
    agent_id     text        NOT NULL,
    session_id   uuid        NOT NULL,
    cycle        int         NOT NULL,
    session_key  text        NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT now(),
    done_at      timestamptz,
    PRIMARY KEY (tenant_id, session_id, cycle)
);

SELECT cairn.isolate_by_tenant('consolidation.documents');
SELECT cairn.isolate_by_tenant('consolidation.document_versions');
SELECT cairn.isolate_by_tenant('consolidation.flushes_due');

GRANT USAGE ON SCHEMA consolidation TO cairn_app;
GRANT SELECT, INSERT, UPDATE ON consolidation.documents, consolidation.document_versions,
    consolidation.flushes_due TO cairn_app;
