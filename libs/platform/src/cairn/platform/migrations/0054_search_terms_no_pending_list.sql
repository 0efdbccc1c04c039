-- Session search in the largest tenant at 1M messages (issue 4): the messages' tenant-keyed GIN (0039) takes each
-- insert into its main structure (fastupdate = off), as the memory chunks' index does (0045). With the default,
-- new messages wait in an unsorted pending list (up to gin_pending_list_limit, 4 MB) until a vacuum or a full
-- list merges them, and every search that reads the index — a rare term, most searches — reads and checks that
-- whole list, whatever its tenant: with messages arriving all day it is seldom empty. Measured on a 1M-message
-- index with ~190 pending pages: the keys' bitmap scan read 266 pages for a two-word query, most of them the
-- list. The indexer writes a tenant's messages in batches; each row's keys now go into the index as they are
-- written (the cost is measured with `cairn bench ingest`, see notes/search8.md). What is pending now is merged
-- here.
ALTER INDEX indexer.messages_tenant_terms SET (fastupdate = off);
SELECT gin_clean_pending_list('indexer.messages_tenant_terms'::regclass);
