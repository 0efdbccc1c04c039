-- The records that make projections exactly-once (cairn.processed_events, and the outbox stored with them)
-- are needed while an event can still come again: a redelivery after a crash (within ack_wait), or a late
-- duplicate publish. Kept forever they would be the largest tables of all (a row per event per consumer),
-- so each service deletes its consumers' records older than a retention (`CAIRN_PROCESSED_KEEP_H`, days by
-- default). A replay from the stream's start rebuilds a projection from empty tables, records included,
-- so it never needs old records.
--
-- The services' roles may not cross tenants, so the deletion is one SECURITY DEFINER function run as the
-- owner, for whom these tables stay FORCE'd: two policies let the owner see and delete records that are at
-- least an hour old, and nothing else. No setting can make a sweep delete a record a redelivery may still
-- need.
CREATE INDEX processed_events_by_age ON cairn.processed_events USING brin (processed_at);

DO $$
BEGIN
    EXECUTE format('CREATE POLICY sweep_old_records ON cairn.processed_events FOR SELECT TO %I '
                   'USING (processed_at < now() - interval ''1 hour'')', current_user);
    EXECUTE format('CREATE POLICY delete_old_records ON cairn.processed_events FOR DELETE TO %I '
                   'USING (processed_at < now() - interval ''1 hour'')', current_user);
    EXECUTE format('CREATE POLICY sweep_old_records ON cairn.outbox FOR SELECT TO %I '
                   'USING (created_at < now() - interval ''1 hour'')', current_user);
    EXECUTE format('CREATE POLICY delete_old_records ON cairn.outbox FOR DELETE TO %I '
                   'USING (created_at < now() - interval ''1 hour'')', current_user);
END
$$;

-- Up to `p_limit` of one consumer's records processed before `p_before`, with the outbox each stored: an
-- outbox never outlives its record (a redelivery that finds no record applies the event afresh and would
-- collide with an orphaned outbox). Returns how many records went.
CREATE FUNCTION cairn.forget_processed(p_consumer text, p_before timestamptz, p_limit int) RETURNS int
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
