-- When a session was last active (event time of its last conversational message; heartbeat and cron
-- traffic never count), so daily and idle reset policies can start a fresh session.
ALTER TABLE session.sessions ADD COLUMN last_activity_at timestamptz;
