-- A tenant's own rate limits and quotas, when the operator set any (`PUT /v1/admin/tenants/{tenant_id}/limits`,
-- ingest's admin API): the body as sent, fields left out keep the deployment's defaults (`CAIRN_LIMITS_*`). A
-- platform table, because every service that answers a tenant's key reads it (cairn.edge.rate_limits). No
-- foreign key to ingest.tenants: the platform's schema is applied before ingest's. Not forced: every replica reads
-- all the overrides at once every few seconds (cairn.all_tenant_limits(), as the owner) instead of one read per
-- tenant; the rows are the operator's settings, not the tenant's data.
CREATE TABLE cairn.tenant_limits (
    tenant_id uuid NOT NULL,
    limits jsonb NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tenant_limits_pkey PRIMARY KEY (tenant_id),
    CONSTRAINT tenant_limits_limits_check CHECK (jsonb_typeof(limits) = 'object')
);
SELECT cairn.isolate_by_tenant('cairn.tenant_limits', force => false);
GRANT SELECT,INSERT,UPDATE,DELETE ON TABLE cairn.tenant_limits TO cairn_app;
