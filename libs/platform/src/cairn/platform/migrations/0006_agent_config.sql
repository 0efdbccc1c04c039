-- Each agent's configuration, owned by ingest (it routes by it), and the part of it the session service
-- needs, projected from `agent.configured` into the session service's own table.
CREATE TABLE ingest.agent_configs (
    tenant_id  uuid        NOT NULL,
    agent_id   text        NOT NULL,
    config     jsonb       NOT NULL,
    version    int         NOT NULL CHECK (version >= 1),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, agent_id)
);

SELECT cairn.isolate_by_tenant('ingest.agent_configs');
GRANT SELECT, INSERT, UPDATE ON ingest.agent_configs TO cairn_app;

-- NULL context_window: the deployment's default (CAIRN_SESSION_CONTEXT_WINDOW). `config_version` keeps a
-- re-published older version from overwriting a newer one.
CREATE TABLE session.agent_settings (
    tenant_id      uuid        NOT NULL,
    agent_id       text        NOT NULL,
    context_window int         CHECK (context_window >= 1000),
    reset_policy   jsonb       NOT NULL,
    config_version int         NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, agent_id)
);

SELECT cairn.isolate_by_tenant('session.agent_settings');
GRANT SELECT, INSERT, UPDATE ON session.agent_settings TO cairn_app;

-- Ingest reads session.sessions and session.entries (SELECT, granted in 0003) only to answer 404 for an
-- unknown session or message before it accepts a fork; it never writes them.
