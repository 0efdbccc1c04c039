-- Search quality (issue 4): a hit names the adapter's message id (so importers and benchmarks can map
-- hits back to what they sent), and the sender's name is part of what a message is found by.
ALTER TABLE indexer.messages ADD COLUMN external_id text, ADD COLUMN sender_name text;
