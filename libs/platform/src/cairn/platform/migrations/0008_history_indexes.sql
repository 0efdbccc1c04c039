-- History reads a window of a session (latest, or the one holding a message) and pages it backwards;
-- the listing walks a tenant's sessions newest first with a keyset cursor. Both become index range scans.
CREATE INDEX entries_window ON session.entries (tenant_id, session_id, reset_index, position);
CREATE INDEX sessions_recent ON session.sessions (tenant_id, agent_id, updated_at DESC, session_key DESC);
