-- Recall before the reply (issue 29) can be turned off per session: `/active-memory off` sent as a user message
-- clears the flag, `/active-memory on` sets it again. It belongs to the key, so a daily or idle reset (a new
-- session id under the same key) keeps it; the recall service reads it with the session's chat type and channel.
ALTER TABLE session.sessions ADD COLUMN active_memory boolean DEFAULT true NOT NULL;
