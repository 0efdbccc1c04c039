-- Recall's schema: the trace of every recall (issue 29, "Trace"), readable by the tenant for a while.

CREATE SCHEMA recall;
GRANT USAGE ON SCHEMA recall TO cairn_app;

-- What one `POST /v1/recall` did: the query it searched with, the lane that answered, the candidates with their
-- scores, what went into the block, the outcome, timings and the model's tokens. Written best-effort after the
-- answer (recall_traces.py), kept `CAIRN_RECALL_TRACE_RETENTION_DAYS`.
CREATE TABLE recall.traces (
    tenant_id uuid NOT NULL,
    trace_id uuid NOT NULL,
    agent_id text NOT NULL,
    session_key text NOT NULL,
    query text NOT NULL,
    lane smallint,
    outcome text NOT NULL,
    reason text,
    candidates jsonb DEFAULT '[]'::jsonb NOT NULL,
    injected jsonb DEFAULT '[]'::jsonb NOT NULL,
    timings_ms jsonb DEFAULT '{}'::jsonb NOT NULL,
    model text,
    tokens jsonb DEFAULT '{}'::jsonb NOT NULL,
    fallbacks text[] DEFAULT '{}'::text[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT traces_pkey PRIMARY KEY (tenant_id, trace_id)
);
SELECT cairn.isolate_by_tenant('recall.traces');
-- The retention sweep (recall.forget_traces) runs as the owner across tenants: it may see and delete traces a
-- day old or older, and nothing else, whatever the setting says.
CREATE POLICY delete_old_traces ON recall.traces FOR DELETE TO cairn_owner USING ((created_at < (now() - '1 day'::interval)));
CREATE POLICY sweep_old_traces ON recall.traces FOR SELECT TO cairn_owner USING ((created_at < (now() - '1 day'::interval)));

GRANT SELECT,INSERT ON TABLE recall.traces TO cairn_app;

-- "The latest traces of a session", newest first; the sweep's scan by age.
CREATE INDEX traces_of_session ON recall.traces USING btree (tenant_id, session_key, created_at DESC);
CREATE INDEX traces_by_age ON recall.traces USING brin (created_at);
