-- session owns sessions and their append-only transcripts.
CREATE SCHEMA IF NOT EXISTS session;

CREATE TABLE session.sessions (
    tenant_id          uuid        NOT NULL,
    agent_id           text        NOT NULL,
    session_key        text        NOT NULL,
    session_id         uuid        NOT NULL,
    chat_type          text        NOT NULL,
    channel            text        NOT NULL,
    status             text        NOT NULL DEFAULT 'active',
    parent_session_id  uuid,
    last_position      int         NOT NULL DEFAULT 0,
    reset_index        int         NOT NULL DEFAULT 0,
    window_tokens      bigint      NOT NULL DEFAULT 0,
    window_bytes       bigint      NOT NULL DEFAULT 0,
    compaction_cycle   int         NOT NULL DEFAULT 0,
    compaction_flagged boolean     NOT NULL DEFAULT false,
    message_count      int         NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, agent_id, session_key),
    UNIQUE (tenant_id, session_id)
);

-- Every entry of a transcript: messages, reset boundaries. Positions are gap-free per session.
CREATE TABLE session.entries (
    tenant_id      uuid        NOT NULL,
    session_id     uuid        NOT NULL,
    position       int         NOT NULL,
    kind           text        NOT NULL CHECK (kind IN ('message', 'reset')),
    message_id     uuid        NOT NULL,
    channel        text        NOT NULL,
    external_id    text,
    role           text,
    text           text,
    sender_name    text,
    peer_id        text,
    reset_index    int         NOT NULL,
    token_estimate int         NOT NULL DEFAULT 0,
    occurred_at    timestamptz NOT NULL,
    recorded_at    timestamptz NOT NULL,
    ingest_seq     bigint,
    PRIMARY KEY (tenant_id, session_id, position)
);
-- The adapter's message id is the idempotency key: same tenant + channel + id is stored once.
CREATE UNIQUE INDEX entries_external_id ON session.entries (tenant_id, channel, external_id)
    WHERE external_id IS NOT NULL;
CREATE UNIQUE INDEX entries_message_id ON session.entries (tenant_id, message_id);

SELECT cairn.isolate_by_tenant('session.sessions');
SELECT cairn.isolate_by_tenant('session.entries');

GRANT USAGE ON SCHEMA session TO cairn_app;
GRANT SELECT, INSERT, UPDATE ON session.sessions, session.entries TO cairn_app;
