-- The request that admitted a batch, named by the problems of its items.
ALTER TABLE batches ADD COLUMN request_id text;
