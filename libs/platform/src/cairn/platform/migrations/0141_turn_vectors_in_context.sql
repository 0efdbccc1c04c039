-- A remembered turn's own vector now reads its line after the line before it in its sitting (turn_in_context);
-- every turn vector stored before that was made from its line alone, under the same model id. Two kinds of vector
-- under one id would be a silent mix, so the old ones are marked as of another model: search leaves them out (it
-- compares only vectors of the configured model, as after a model change) and the indexer's memory worker
-- re-embeds them in the background, in context.
UPDATE indexer.memory_turns SET model = model || ' (line alone)' WHERE model IS NOT NULL;
