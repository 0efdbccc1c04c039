-- Read-your-writes per agent: the session service applies each (tenant, agent) partition in order, but
-- different agents of one tenant progress independently, so a tenant-wide high-water mark could pass
-- an agent's write that is not indexed yet.
ALTER TABLE indexer.progress ADD COLUMN agent_id text NOT NULL DEFAULT 'main';
ALTER TABLE indexer.progress ALTER COLUMN agent_id DROP DEFAULT;
ALTER TABLE indexer.progress DROP CONSTRAINT progress_pkey;
ALTER TABLE indexer.progress ADD PRIMARY KEY (tenant_id, agent_id);
