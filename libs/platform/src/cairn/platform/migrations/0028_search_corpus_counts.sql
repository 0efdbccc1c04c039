-- Session search at 1M messages (issue 4). BM25 needs the size of the tenant's corpus; counting the tenant's
-- rows on every search cost as much as the matching itself in a large tenant. The count is kept with the
-- rows instead, per agent, by statement triggers: every writer of indexer.messages (the indexer's batch
-- INSERT, a copy, a future erasure) keeps it exact in its own transaction, one upsert per statement.
CREATE TABLE indexer.message_counts (
    tenant_id uuid   NOT NULL,
    agent_id  text   NOT NULL,
    messages  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, agent_id)
);
SELECT cairn.isolate_by_tenant('indexer.message_counts');
GRANT SELECT, INSERT, UPDATE ON indexer.message_counts TO cairn_app;

-- Rows counted in (INSERT, including only the rows an ON CONFLICT DO NOTHING really inserted) or out
-- (DELETE). Rows never move between tenants or agents, so UPDATE needs no trigger. Upserts go in key
-- order, so two transactions of one tenant cannot deadlock on its agents' counts.
CREATE FUNCTION indexer.count_messages() RETURNS trigger
LANGUAGE plpgsql SET search_path = indexer, pg_temp AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO indexer.message_counts AS c (tenant_id, agent_id, messages)
        SELECT tenant_id, agent_id, count(*) FROM counted_rows GROUP BY tenant_id, agent_id ORDER BY 1, 2
        ON CONFLICT (tenant_id, agent_id) DO UPDATE SET messages = c.messages + excluded.messages;
    ELSE
        UPDATE indexer.message_counts c SET messages = c.messages - gone.messages
        FROM (SELECT tenant_id, agent_id, count(*) AS messages FROM counted_rows GROUP BY tenant_id, agent_id
              ORDER BY 1, 2) gone
        WHERE c.tenant_id = gone.tenant_id AND c.agent_id = gone.agent_id;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER messages_counted_in AFTER INSERT ON indexer.messages
    REFERENCING NEW TABLE AS counted_rows FOR EACH STATEMENT EXECUTE FUNCTION indexer.count_messages();
CREATE TRIGGER messages_counted_out AFTER DELETE ON indexer.messages
    REFERENCING OLD TABLE AS counted_rows FOR EACH STATEMENT EXECUTE FUNCTION indexer.count_messages();

-- The triggers exist from here on, inside this migration's transaction (which holds off the indexer's
-- inserts): the rows stored before are counted once.
INSERT INTO indexer.message_counts (tenant_id, agent_id, messages)
SELECT tenant_id, agent_id, count(*) FROM indexer.messages GROUP BY tenant_id, agent_id;
