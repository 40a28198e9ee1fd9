-- Content search (GET /v1/search): the text of every blob, indexed by
-- Postgres's own pg_trgm.
--
-- An extension belongs to the whole database, while migrations take turns
-- per schema: instances migrating several schemas of one database at once
-- take turns here, so one creates it and the others find it. It goes into
-- public (or, without one, the schema being migrated), never into a schema
-- that may be dropped with the data of one installation.
SELECT pg_advisory_xact_lock(hashtext('agentfs.extension.pg_trgm'));
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        IF EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'public') THEN
            CREATE EXTENSION pg_trgm SCHEMA public;
        ELSE
            CREATE EXTENSION pg_trgm;
        END IF;
    END IF;
END $$;

-- One row per blob, written in the statement that first points a file at
-- it (blobs never change; a revert, a copy or a restore shares the row of
-- the blob it shares). kind: 0 text (valid UTF-8 without NUL, at most
-- AGENTFS_SEARCH_MAX_FILE_BYTES; body holds it), 1 binary, 2 too large.
-- A file whose blob has no row is not indexed yet (written before this
-- migration: IndexOldFiles fills those in).
CREATE TABLE search_texts (
    blob_key  text PRIMARY KEY,
    subject   text NOT NULL,
    kind      smallint NOT NULL CHECK (kind IN (0, 1, 2)),
    body      text,
    CHECK ((kind = 0) = (body IS NOT NULL))
);
DO $$
BEGIN
    EXECUTE format('CREATE INDEX search_texts_trgm ON search_texts USING gin (body %I.gin_trgm_ops) WHERE kind = 0',
        (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'));
END $$;
-- The files a search skips, counted per subject.
CREATE INDEX search_texts_skipped ON search_texts (subject) WHERE kind <> 0;

-- Search answers in path order, byte by byte whatever the database's
-- collation, and walks a subject's live files in that order when the
-- pattern gives the index nothing to look for.
CREATE INDEX files_search_path ON files (subject, path COLLATE "C") WHERE deleted_at IS NULL;

-- Whether every blob written before this migration has its row: done_at
-- is set at once when there were none, else by IndexOldFiles when it has
-- gone through them all.
CREATE TABLE search_backfill (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    done_at  timestamptz
);
INSERT INTO search_backfill (done_at)
    SELECT CASE WHEN EXISTS (SELECT 1 FROM file_versions) THEN NULL ELSE now() END;
