-- What became of each memory write request (applied as a version, or why not), written by consolidation
-- in the same transaction as the document, so that ingest can answer the client's PUT, POST or DELETE
-- with the version or a 409/404/413 instead of a bare "accepted".
CREATE TABLE consolidation.write_outcomes (
    tenant_id   uuid        NOT NULL,
    request_id  uuid        NOT NULL,
    agent_id    text        NOT NULL,
    path        text        NOT NULL,
    outcome     text        NOT NULL CHECK (outcome IN ('applied', 'unchanged', 'conflict', 'missing', 'too_large')),
    version     int         NOT NULL,
    change      text,
    detail      text        NOT NULL DEFAULT '',
    decided_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, request_id)
);
CREATE INDEX write_outcomes_age ON consolidation.write_outcomes (tenant_id, decided_at);

SELECT cairn.isolate_by_tenant('consolidation.write_outcomes');

GRANT SELECT, INSERT, DELETE ON consolidation.write_outcomes TO cairn_app;
