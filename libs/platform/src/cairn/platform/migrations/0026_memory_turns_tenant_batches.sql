-- The memory index's transcript consumer applies a fetched batch of many tenants in one transaction too
-- (see 0025): remembered turns, their sessions' debounce and the memory index's read-your-writes positions.
-- Its statements name each row's tenant; chunks and documents stay one tenant per transaction.
SELECT cairn.admit_tenant_batches('indexer.memory_turns');
SELECT cairn.admit_tenant_batches('indexer.memory_pending');
SELECT cairn.admit_tenant_batches('indexer.memory_progress');
