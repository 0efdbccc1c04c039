-- Memory search speed (s20 exactcut): a small agent's exact vector scan reads narrow rows that hold the vectors.
--
-- An agent of up to EXACT_UP_TO chunks (services/recall memory_queries) is searched exactly: its rows by the
-- (tenant_id, agent_id, source) index, the cosine of each. But a chunk row is wide (a chunk of 20 conversation turns
-- keeps 5-7 kB of terms in line, 0090), so its 2 kB vector (512-d) is always stored out of line by TOAST: each
-- chunk scanned cost its heap page, a TOAST index probe and the vector's two TOAST rows, about 8 buffers. On the
-- realistic seed an agent of 10,000 chunks read ~81,000 buffers a search (~140 ms in the recall service), several
-- times what an agent of 100,000 chunks pays on HNSW: a cliff just below the cut-over.
--
-- memory_chunk_vectors keeps, per chunk with a vector, what the exact scan filters by (agent, source, session key,
-- model) and the vector itself, in line (STORAGE MAIN: moved out only when a row would not fit a page, so a
-- 3,072-d vector is still stored), three 512-d rows a page. The scan reads the agent's rows from its own btree and
-- computes the same cosine of the same values, so its answers are the same ids and scores; measured on the
-- realistic seed, 1,000 to 20,000 chunks (/work/notes/s20-exactcut): see the README's memory search section.
--
-- Kept by triggers on memory_chunks (R__memory_chunk_vectors_*: statement triggers for inserts and deletes with the
-- transition tables, a row trigger for an update of a copied column, a re-embedding included), as the owner.
-- cairn_app reads it through the tenant policy (the scan's filters are plain equalities). Storage: ~2.2 kB a 512-d
-- chunk (220 MB at 100k chunks), next to the TOAST copy memory_chunks keeps for details and HNSW.
--
-- Filled here from the existing chunks; memory_chunks is locked against writes until the migration's transaction
-- (which also creates the triggers) commits, so no chunk written meanwhile is missed.
LOCK TABLE indexer.memory_chunks IN SHARE MODE;
CREATE TABLE indexer.memory_chunk_vectors (
    tenant_id uuid NOT NULL,
    chunk_id uuid NOT NULL,
    agent_id text NOT NULL,
    source text NOT NULL,
    session_key text,
    path text,
    model text NOT NULL,
    embedding public.vector NOT NULL,
    CONSTRAINT memory_chunk_vectors_pkey PRIMARY KEY (tenant_id, chunk_id)
);
ALTER TABLE indexer.memory_chunk_vectors ALTER COLUMN embedding SET STORAGE MAIN;
SELECT cairn.isolate_by_tenant('indexer.memory_chunk_vectors', force => false);
GRANT SELECT ON TABLE indexer.memory_chunk_vectors TO cairn_app;
INSERT INTO indexer.memory_chunk_vectors
SELECT tenant_id, chunk_id, agent_id, source, session_key, path, model, embedding FROM indexer.memory_chunks
WHERE embedding IS NOT NULL
ORDER BY tenant_id, agent_id;
CREATE INDEX memory_chunk_vectors_agent ON indexer.memory_chunk_vectors USING btree (tenant_id, agent_id, model);
