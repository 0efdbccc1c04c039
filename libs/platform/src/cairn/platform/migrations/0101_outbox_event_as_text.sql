-- Ingest throughput (issue 4): a projection's outbox keeps each emitted event as the text it publishes, not as
-- jsonb. The outbox is written for every event the session service emits (one `transcript.appended` per message,
-- the message's text included) and read back only on a redelivery, which decodes it as JSON text anyway; jsonb
-- made Postgres parse and convert every event on the way in. Micro A/B (64-row INSERT ... FROM unnest of
-- transcript events, alternated, load ~11): jsonb 133, json 102, text 71 us per row (wall, median of 6 rounds).
-- Rows stored before are converted by jsonb's own output (still the same event when decoded).
--
-- Rewrites the table under an exclusive lock: it holds only the records still inside the retention window
-- (`CAIRN_NATS__PROCESSED_RETENTION_H`), so seconds, during which projections wait.
ALTER TABLE cairn.outbox ALTER COLUMN event TYPE text USING event::text;
