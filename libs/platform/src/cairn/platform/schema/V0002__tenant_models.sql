-- The model each tenant's LLM work goes to, when the operator set one other than the deployment's
-- (`CAIRN_LLM_*`), and the tokens each tenant spent. Platform tables, because every service that asks a model
-- (recall, consolidation) reads the override and records what it spent; only ingest's admin API writes an
-- override (`PUT /v1/admin/tenants/{tenant_id}/model`), after checking its host against the operator's
-- allow-list. No foreign key to ingest.tenants: the platform's schema is applied before ingest's.
CREATE TABLE cairn.tenant_models (
    tenant_id uuid NOT NULL,
    base_url text NOT NULL,
    model text NOT NULL,
    -- Sent to the tenant's model server as a bearer token; never answered by the API (only whether it is set).
    api_key text,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tenant_models_pkey PRIMARY KEY (tenant_id),
    CONSTRAINT tenant_models_base_url_check CHECK (length(base_url) BETWEEN 1 AND 2000),
    CONSTRAINT tenant_models_model_check CHECK (length(model) BETWEEN 1 AND 200),
    CONSTRAINT tenant_models_api_key_check CHECK (length(api_key) BETWEEN 1 AND 4000)
);
SELECT cairn.isolate_by_tenant('cairn.tenant_models');
GRANT SELECT,INSERT,UPDATE,DELETE ON TABLE cairn.tenant_models TO cairn_app;

-- Token accounting: one row per tenant, UTC day, purpose (what the call was for: "recall", "memory-writer")
-- and model, counted up by every call (`Models.record_usage`, an upsert).
CREATE TABLE cairn.model_usage (
    tenant_id uuid NOT NULL,
    day date NOT NULL,
    purpose text NOT NULL,
    model text NOT NULL,
    calls bigint DEFAULT 0 NOT NULL,
    failures bigint DEFAULT 0 NOT NULL,
    prompt_tokens bigint DEFAULT 0 NOT NULL,
    completion_tokens bigint DEFAULT 0 NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT model_usage_pkey PRIMARY KEY (tenant_id, day, purpose, model),
    CONSTRAINT model_usage_purpose_check CHECK (length(purpose) BETWEEN 1 AND 64),
    CONSTRAINT model_usage_model_check CHECK (length(model) BETWEEN 1 AND 200),
    CONSTRAINT model_usage_counts_check CHECK (calls >= 0 AND failures >= 0 AND prompt_tokens >= 0
                                               AND completion_tokens >= 0)
);
SELECT cairn.isolate_by_tenant('cairn.model_usage');
GRANT SELECT,INSERT,UPDATE ON TABLE cairn.model_usage TO cairn_app;
