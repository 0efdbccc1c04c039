-- Every session id a key has pointed to: daily and idle resets move a key to a new id, and the earlier
-- ones stay readable (history `?session_id=`).
CREATE TABLE session.key_sessions (
    tenant_id   uuid        NOT NULL,
    agent_id    text        NOT NULL,
    session_key text        NOT NULL,
    session_id  uuid        NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id)
);
CREATE INDEX key_sessions_key ON session.key_sessions (tenant_id, agent_id, session_key, started_at);

INSERT INTO session.key_sessions (tenant_id, agent_id, session_key, session_id, started_at)
SELECT tenant_id, agent_id, session_key, session_id, created_at FROM session.sessions
ON CONFLICT DO NOTHING;

SELECT cairn.isolate_by_tenant('session.key_sessions');
GRANT SELECT, INSERT ON session.key_sessions TO cairn_app;
