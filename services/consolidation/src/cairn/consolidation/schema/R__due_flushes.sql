-- Flushes due now, of every tenant, oldest first: what the flush worker then claims one by one (FOR UPDATE SKIP
-- LOCKED in the flush's tenant transaction, so two replicas never flush one cycle twice). Read as the owner,
-- for whom consolidation.flushes_due is not forced (V0002__flush_state).
CREATE OR REPLACE FUNCTION consolidation.due_flushes(p_limit int)
RETURNS TABLE (tenant_id uuid, session_id uuid, reset_index integer, cycle integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = consolidation, pg_temp AS $$
    SELECT f.tenant_id, f.session_id, f.reset_index, f.cycle FROM consolidation.flushes_due f
    WHERE f.done_at IS NULL AND f.next_attempt_at <= now()
    ORDER BY f.next_attempt_at LIMIT p_limit
$$;

REVOKE ALL ON FUNCTION consolidation.due_flushes(int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION consolidation.due_flushes(int) TO cairn_app;
