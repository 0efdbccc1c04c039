-- Per-agent message counts (indexer.message_counts), kept by statement triggers on indexer.messages: BM25's corpus
-- size.
-- Defined so by migration 0028_search_corpus_counts.
--
-- Rows counted in (INSERT, including only the rows an ON CONFLICT DO NOTHING really inserted) or out
-- (DELETE). Rows never move between tenants or agents, so UPDATE needs no trigger. Upserts go in key
-- order, so two transactions of one tenant cannot deadlock on its agents' counts.
CREATE OR REPLACE FUNCTION indexer.count_messages() RETURNS trigger
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

CREATE OR REPLACE TRIGGER messages_counted_in AFTER INSERT ON indexer.messages
    REFERENCING NEW TABLE AS counted_rows
    FOR EACH STATEMENT
    EXECUTE FUNCTION indexer.count_messages();
CREATE OR REPLACE TRIGGER messages_counted_out AFTER DELETE ON indexer.messages
    REFERENCING OLD TABLE AS counted_rows
    FOR EACH STATEMENT
    EXECUTE FUNCTION indexer.count_messages();
