-- The row type the session projection sends its buffered transcript entries in: one array of records instead of
-- sixteen column arrays. asyncpg checks every element of an array argument for being a nested array (Python-level
-- ABC checks), so sixteen arrays cost sixteen checks per entry and one array of records one; the values are
-- encoded as before. A type of its own, not session.entries' row type, so that a column added to the table
-- leaves the statement as it is. Types are usable by every role (PUBLIC has USAGE); nothing else changes.
CREATE TYPE session.entry_row AS (
    tenant_id uuid, session_id uuid, position integer, kind text, message_id uuid, channel text, external_id text,
    role text, text text, sender_name text, peer_id text, reset_index integer, token_estimate integer,
    occurred_at timestamptz, recorded_at timestamptz, ingest_seq bigint
);
