-- Memory search speed (issue 5): the full-text keys' bitmap reads narrow rows, not the chunks themselves.
--
-- The bitmap way (memory_matches_by_bitmap, 0058) read every match's row from memory_chunks to sort the matches by
-- recency and keep the newest `cap`. A chunk of 20 conversation turns keeps 5-7 kB of terms in its row (0090), so a
-- row is a page: a question whose words are common in the agent ("What has Melanie painted?": thousands of the
-- realistic 100k seed's chunks) read thousands of heap pages (781 MB of heap against 128 MB of shared buffers),
-- 100-800 ms under load, for 300 rows. That is most of memory search's tail on the realistic seed
-- (`cairn bench memindex --part search --data ../shared/datasets/locomo`).
--
-- Now each chunk has a row in memory_chunk_keys: what the way filters and sorts by (agent, source, session key,
-- occurred_at) and its lexemes without positions (`strip(terms)`, stored out of line by TOAST: the row is about
-- 90 bytes, 9 MB of heap for 100k chunks). The full-text keys (tenant-qualified, 0039) are indexed there instead of
-- on memory_chunks, so the way reads the GIN, then the narrow rows of every match, sorts them by recency, and only
-- then fetches the chunks by primary key, newest first, until `cap` of them match `terms @@ query` (the row's own
-- terms still decide: a phrase `a <-> b` is `a & b` for the keys). Same rows (the most recent `cap` matches), same
-- signature and grants. Measured on the realistic 100k seed, 2 cores at load 4.7-6.7:
-- the way alone against a copy of the table of narrow rows, interleaved, 2 rounds of the bench's 161 distinct
-- questions: at the cap (170 calls) mean 94.6 -> 23.8 ms, median per-call ratio 0.36, all calls p99 543 -> 70 ms;
-- the whole lexical statement (LEXICAL_ROWS, dispatcher 0124 unchanged), old way B against this one A, AB/BA
-- alternating, 2 rounds of the 200 questions: p50 41.6 -> 38.9, p99 151.0 -> 112.6, mean 49.9 -> 42.2 ms,
-- median per-query ratio 0.94, identical ids and scores 400/400.
--
-- The rows are kept by statement triggers on memory_chunks (inserted, deleted: one statement each, with the
-- transition tables) and a row trigger for an update of a column it copies (not for a re-embedding). The functions
-- run as the owner: the service roles never read or write the table. Storage: the keys' TOAST is about the size of
-- the terms (~650 MB at 100k realistic chunks); the GIN over dense narrow rows is 57 MB against 133 MB over the chunks.

CREATE TABLE indexer.memory_chunk_keys (
    tenant_id uuid NOT NULL,
    chunk_id uuid NOT NULL,
    agent_id text NOT NULL,
    source text NOT NULL,
    session_key text,
    occurred_at timestamptz,
    lexemes tsvector NOT NULL,
    PRIMARY KEY (tenant_id, chunk_id)
);
-- read and written only by owner functions (not forced, as memory_chunks since 0031)
SELECT cairn.isolate_by_tenant('indexer.memory_chunk_keys', false);

INSERT INTO indexer.memory_chunk_keys
SELECT c.tenant_id, c.chunk_id, c.agent_id, c.source, c.session_key, c.occurred_at, strip(c.terms)
FROM indexer.memory_chunks c;
CREATE INDEX memory_chunk_keys_terms ON indexer.memory_chunk_keys USING gin (indexer.tenant_terms(tenant_id, lexemes))
    WITH (fastupdate = off);
DROP INDEX indexer.memory_chunks_tenant_terms;

CREATE FUNCTION indexer.memory_chunk_keys_inserted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = indexer, pg_temp
AS $$
BEGIN
    INSERT INTO indexer.memory_chunk_keys
    SELECT n.tenant_id, n.chunk_id, n.agent_id, n.source, n.session_key, n.occurred_at, strip(n.terms) FROM added n;
    RETURN NULL;
END
$$;

CREATE FUNCTION indexer.memory_chunk_keys_deleted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = indexer, pg_temp
AS $$
BEGIN
    DELETE FROM indexer.memory_chunk_keys k USING removed o WHERE k.tenant_id = o.tenant_id AND k.chunk_id = o.chunk_id;
    RETURN NULL;
END
$$;

CREATE FUNCTION indexer.memory_chunk_keys_updated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = indexer, pg_temp
AS $$
BEGIN
    DELETE FROM indexer.memory_chunk_keys k WHERE k.tenant_id = OLD.tenant_id AND k.chunk_id = OLD.chunk_id;
    INSERT INTO indexer.memory_chunk_keys
    VALUES (NEW.tenant_id, NEW.chunk_id, NEW.agent_id, NEW.source, NEW.session_key, NEW.occurred_at, strip(NEW.terms));
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION indexer.memory_chunk_keys_inserted() FROM PUBLIC;
REVOKE ALL ON FUNCTION indexer.memory_chunk_keys_deleted() FROM PUBLIC;
REVOKE ALL ON FUNCTION indexer.memory_chunk_keys_updated() FROM PUBLIC;

CREATE TRIGGER memory_chunk_keys_inserted AFTER INSERT ON indexer.memory_chunks
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION indexer.memory_chunk_keys_inserted();
CREATE TRIGGER memory_chunk_keys_deleted AFTER DELETE ON indexer.memory_chunks
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION indexer.memory_chunk_keys_deleted();
CREATE TRIGGER memory_chunk_keys_updated
    AFTER UPDATE OF tenant_id, chunk_id, agent_id, source, session_key, occurred_at, terms ON indexer.memory_chunks
    FOR EACH ROW EXECUTE FUNCTION indexer.memory_chunk_keys_updated();

-- The keys' table has no other index the planner may take (its primary key cannot serve `IS TRUE`), so its GIN is
-- read as a bitmap; the chunks are then fetched by primary key in recency order until `cap` of them match.
CREATE OR REPLACE FUNCTION indexer.memory_matches_by_bitmap(
    p_tenant uuid, p_agent text, p_sources text[], p_exclude_session_key text, p_query tsquery, p_cap int
)
RETURNS TABLE (chunk_id uuid, terms tsvector)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = indexer, pg_temp
SET plan_cache_mode = force_custom_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_material = off
AS $$
    SELECT m.chunk_id, m.terms
    FROM (
        SELECT k.chunk_id, k.occurred_at
        FROM indexer.memory_chunk_keys k
        WHERE indexer.tenant_terms(k.tenant_id, k.lexemes) @@ indexer.tenant_terms_query(p_tenant, p_query)
          AND (k.tenant_id = p_tenant) IS TRUE AND p_tenant = cairn.current_tenant() AND (k.agent_id = p_agent) IS TRUE
          AND k.source = ANY(p_sources) AND (p_exclude_session_key IS NULL OR k.session_key IS DISTINCT FROM p_exclude_session_key)
        ORDER BY k.occurred_at DESC NULLS LAST, k.chunk_id
    ) newest
    CROSS JOIN LATERAL (
        SELECT c.chunk_id, c.terms FROM indexer.memory_chunks c
        WHERE c.tenant_id = p_tenant AND c.chunk_id = newest.chunk_id AND c.terms @@ p_query
    ) m
    ORDER BY newest.occurred_at DESC NULLS LAST, newest.chunk_id
    LIMIT p_cap
$$;
