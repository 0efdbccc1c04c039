-- GET /v1/memory/status counts an agent's chunks by source, its documents (distinct paths), the chunks without a
-- vector of the current model and the last indexing time (recall's STATUS_CHUNKS). Without an index holding those
-- columns it read every chunk row of the agent (wide rows: text, terms, a 512-d vector) and sorted the paths: for an
-- agent of 100k chunks 7.4-14.9 s (7.8 s through the API after a restart). A covering index in path order answers it
-- by an index-only scan already sorted for count(DISTINCT path): 29-50 ms on the same 100k, 0.05-0.11 s through the
-- API. It also serves every (tenant, agent, path) lookup memory_chunks_path served; that one is kept (partial, smaller).
CREATE INDEX memory_chunks_status ON indexer.memory_chunks (tenant_id, agent_id, path) INCLUDE (source, model, indexed_at);
