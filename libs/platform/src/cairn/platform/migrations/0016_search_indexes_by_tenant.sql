-- Search at scale (issue 4). Every search is within one tenant, so the full-text index leads with the
-- tenant: a term common across all tenants no longer makes a small tenant's search read everyone's
-- matches (btree_gin is a trusted extension, so the owner may create it). A search ranks at most the
-- most recent N matches; (tenant, occurred_at) lets a frequent term find them by walking back in time
-- instead of sorting every match.
CREATE EXTENSION IF NOT EXISTS btree_gin;
DROP INDEX IF EXISTS indexer.messages_terms;
CREATE INDEX messages_tenant_terms ON indexer.messages USING gin (tenant_id, terms);
CREATE INDEX messages_tenant_recent ON indexer.messages (tenant_id, occurred_at DESC, message_id);
