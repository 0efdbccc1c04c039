-- Memory search speed (issue 5): the chunk GIN index takes each insert into its main structure
-- (fastupdate = off) instead of a pending list. With the default, new chunks wait in an unsorted pending list
-- (up to gin_pending_list_limit, 4 MB) until a vacuum or a full list merges them, and every search that uses
-- the index reads and checks that whole list: the indexer writes chunks all day, so searches kept paying for
-- it. Chunks are written a few at a time (a document edit, a debounced conversation), so the insert cost is
-- small; searches are the hot path. What is pending now is merged here.
ALTER INDEX indexer.memory_chunks_tenant_terms SET (fastupdate = off);
SELECT gin_clean_pending_list('indexer.memory_chunks_tenant_terms'::regclass);
