-- The search index's trigram entries are made in the background, out of
-- the write's transaction. A write records its blob's text as kind 3
-- (text, not in the trigram index yet: the index's predicate is kind = 0,
-- so the write pays for no trigrams), and the mover
-- (storage.Store.KeepIndexingPending) turns those rows into kind 0 in
-- batches, which is when the trigram index takes them. A search looks up
-- kind 0 rows through the trigram index and reads the few kind 3 rows of
-- its subject whole (search_texts_pending), so a write is searchable as
-- soon as it commits, and a crash before the move loses nothing: the row
-- is there, and the next mover moves it.
ALTER TABLE search_texts
    DROP CONSTRAINT search_texts_kind_check,
    DROP CONSTRAINT search_texts_check,
    ADD CONSTRAINT search_texts_kind_check CHECK (kind IN (0, 1, 2, 3)),
    ADD CONSTRAINT search_texts_check CHECK ((kind IN (0, 3)) = (body IS NOT NULL));

CREATE INDEX search_texts_pending ON search_texts (subject) WHERE kind = 3;

-- The files a search skips (binary, too large), without the pending texts.
DROP INDEX search_texts_skipped;
CREATE INDEX search_texts_skipped ON search_texts (subject) WHERE kind IN (1, 2);
