-- The row types the indexer sends a batch's searchable messages and remembered turns in: one array of records each
-- instead of fifteen and twelve column arrays, as the session's entries travel since 0132. asyncpg checks every
-- element of an array argument for being a nested array (Python-level ABC checks), so column arrays cost one check
-- per value and an array of records one per row; measured on a 230-row batch, the client's CPU per message row
-- halves and the backend's drops too (one binary record per row instead of fifteen array walks). Types of their
-- own, not the tables' row types, so that a column added to a table leaves the statements as they are; `terms`
-- travels as text and is cast to tsvector in the SELECT, as before. Types are usable by every role.
CREATE TYPE indexer.message_row AS (
    tenant_id uuid, agent_id text, message_id uuid, session_key text, session_id uuid, position integer,
    reset_index integer, role text, chat_type text, text text, terms text, occurred_at timestamptz, ingest_seq bigint,
    external_id text, sender_name text
);
CREATE TYPE indexer.turn_row AS (
    tenant_id uuid, agent_id text, session_id uuid, position integer, reset_index integer, session_key text,
    message_id uuid, role text, sender_name text, text text, occurred_at timestamptz, external_id text
);
