-- The pre-compaction flush itself (issue 30): a due flush is now done by consolidation's flush worker, a silent
-- model turn over the transcript window the event fixed, and its state is what session metadata shows.
--
-- A flush is one per (session, window, compaction cycle): a reset starts a new window but keeps the session's
-- cycle count, so (session, cycle) alone took the first window's flush for the next one's and dropped it.
-- `up_to_position` is the window's last transcript position when compaction-imminent was emitted (NULL for an
-- event from before it: read up to the window's end when the flush runs). A due flush waits here, durably,
-- until it is done: `next_attempt_at` is when it is tried again after a failure (backoff) or, with no model
-- for its tenant, when the worker looks again.
ALTER TABLE consolidation.flushes_due
    ADD COLUMN reset_index integer DEFAULT 0 NOT NULL,
    ADD COLUMN up_to_position integer,
    ADD COLUMN forced boolean DEFAULT false NOT NULL,
    ADD COLUMN attempts integer DEFAULT 0 NOT NULL,
    ADD COLUMN failures integer DEFAULT 0 NOT NULL,
    ADD COLUMN last_error text,
    ADD COLUMN last_attempt_at timestamp with time zone,
    ADD COLUMN next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    ADD COLUMN daily_path text,
    ADD COLUMN notes_chars integer,
    ADD COLUMN refused integer DEFAULT 0 NOT NULL;

ALTER TABLE consolidation.flushes_due
    DROP CONSTRAINT flushes_due_pkey,
    ADD CONSTRAINT flushes_due_pkey PRIMARY KEY (tenant_id, session_id, reset_index, cycle);

CREATE INDEX flushes_due_next ON consolidation.flushes_due USING btree (next_attempt_at) WHERE done_at IS NULL;

-- The worker looks for due flushes of every tenant in one call (consolidation.due_flushes, run as the owner),
-- for whom the table is no longer forced (as indexer.memory_pending is not); cairn_app still sees it only
-- through its policy, and claims each flush in its tenant's transaction.
ALTER TABLE consolidation.flushes_due NO FORCE ROW LEVEL SECURITY;
