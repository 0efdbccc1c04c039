-- The session service's schema: sessions, their entries (the transcript), session keys and per-agent settings.
-- The squash of migrations 0001-0151 (see tests/integration/schema/): today's schema in one file.

CREATE SCHEMA session;
GRANT USAGE ON SCHEMA session TO cairn_app;

-- The row type the session projection sends its buffered transcript entries in: one array of records instead of
-- sixteen column arrays. asyncpg checks every element of an array argument for being a nested array (Python-level
-- ABC checks), so sixteen arrays cost sixteen checks per entry and one array of records one; the values are
-- encoded as before. A type of its own, not session.entries' row type, so that a column added to the table
-- leaves the statement as it is. Types are usable by every role (PUBLIC has USAGE).
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

-- NULL context_window: the deployment's default (CAIRN_SESSION_CONTEXT_WINDOW). `config_version` keeps a
-- re-published older version from overwriting a newer one.
-- Per-agent session policies, projected from `agent.configured`: a reset policy per chat type (or for
-- threads) in place of the agent's default one, and retention thresholds (NULL: the deployment's default).
-- Each agent's compaction thresholds (reserve, soft threshold, byte limit), projected from
-- `agent.configured`; a missing field means the deployment's default (CAIRN_SESSION_*).
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
    CONSTRAINT agent_settings_context_window_check CHECK ((context_window >= 1000)),
    CONSTRAINT agent_settings_pkey PRIMARY KEY (tenant_id, agent_id)
);
SELECT cairn.isolate_by_tenant('session.agent_settings');

-- Every entry of a transcript: messages, reset boundaries. Positions are gap-free per session.
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
    CONSTRAINT entries_kind_check CHECK ((kind = ANY (ARRAY['message'::text, 'reset'::text]))),
    CONSTRAINT entries_pkey PRIMARY KEY (tenant_id, session_id, "position")
);
SELECT cairn.isolate_by_tenant('session.entries');

-- Every session id a key has pointed to: daily and idle resets move a key to a new id, and the earlier
-- ones stay readable (history `?session_id=`).
CREATE TABLE session.key_sessions (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    session_key text NOT NULL,
    session_id uuid NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT key_sessions_pkey PRIMARY KEY (tenant_id, session_id)
);
SELECT cairn.isolate_by_tenant('session.key_sessions');

-- When a session was last active (event time of its last conversational message; heartbeat and cron
-- traffic never count), so daily and idle reset policies can start a fresh session.
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
    CONSTRAINT sessions_pkey PRIMARY KEY (tenant_id, agent_id, session_key),
    CONSTRAINT sessions_tenant_id_session_id_key UNIQUE (tenant_id, session_id)
);
SELECT cairn.isolate_by_tenant('session.sessions');

GRANT SELECT,INSERT,UPDATE ON TABLE session.agent_settings TO cairn_app;
GRANT SELECT,INSERT,UPDATE ON TABLE session.entries TO cairn_app;
GRANT SELECT,INSERT ON TABLE session.key_sessions TO cairn_app;
GRANT SELECT,INSERT,UPDATE ON TABLE session.sessions TO cairn_app;



-- The adapter's message id is the idempotency key: same tenant + channel + id is stored once.
CREATE UNIQUE INDEX entries_external_id ON session.entries USING btree (tenant_id, channel, external_id) WHERE (external_id IS NOT NULL);

CREATE UNIQUE INDEX entries_message_id ON session.entries USING btree (tenant_id, message_id);

-- History reads a window of a session (latest, or the one holding a message) and pages it backwards;
-- the listing walks a tenant's sessions newest first with a keyset cursor. Both become index range scans.
CREATE INDEX entries_window ON session.entries USING btree (tenant_id, session_id, reset_index, "position");

CREATE INDEX key_sessions_key ON session.key_sessions USING btree (tenant_id, agent_id, session_key, started_at);

CREATE INDEX sessions_lifecycle ON session.sessions USING btree (tenant_id, status, updated_at);

CREATE INDEX sessions_recent ON session.sessions USING btree (tenant_id, agent_id, updated_at DESC, session_key DESC);
