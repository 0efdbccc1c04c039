-- The retention sweep of the exactly-once records: a consumer's processed events older than a bound, with their
-- outboxes.
-- Defined so by migration 0051_processed_records_retention.
--
-- Up to `p_limit` of one consumer's records processed before `p_before`, with the outbox each stored: an
-- outbox never outlives its record (a redelivery that finds no record applies the event afresh and would
-- collide with an orphaned outbox). Returns how many records went.
CREATE OR REPLACE FUNCTION cairn.forget_processed(p_consumer text, p_before timestamptz, p_limit int) RETURNS int
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, cairn AS $$
    WITH old AS (
        SELECT event_id FROM cairn.processed_events
        WHERE consumer = p_consumer AND processed_at < p_before
        LIMIT p_limit
    ), outbox_gone AS (
        DELETE FROM cairn.outbox o USING old WHERE o.consumer = p_consumer AND o.causation_id = old.event_id
    ), gone AS (
        DELETE FROM cairn.processed_events p USING old WHERE p.consumer = p_consumer AND p.event_id = old.event_id
        RETURNING 1
    )
    SELECT count(*)::int FROM gone
$$;

REVOKE ALL ON FUNCTION cairn.forget_processed(text, timestamptz, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cairn.forget_processed(text, timestamptz, int) TO cairn_app;
