-- File history: every content of a file is a version; the file row holds
-- the current one. Versions share blobs after a revert.
CREATE TABLE file_versions (
    file_id        text NOT NULL REFERENCES files (id) ON DELETE CASCADE,
    version        integer NOT NULL,
    subject        text NOT NULL,
    size_bytes     bigint NOT NULL,
    content_type   text NOT NULL,
    sha256         text NOT NULL,
    blob_key       text NOT NULL,
    agent_id       text,
    run_id         text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    superseded_at  timestamptz,  -- when the next version was made
    PRIMARY KEY (file_id, version)
);
CREATE INDEX file_versions_blob_key ON file_versions (blob_key);
CREATE INDEX file_versions_superseded ON file_versions (superseded_at) WHERE superseded_at IS NOT NULL;
INSERT INTO file_versions (file_id, version, subject, size_bytes, content_type, sha256, blob_key, agent_id, run_id, created_at)
    SELECT id, version, subject, size_bytes, content_type, sha256, blob_key, last_agent_id, last_run_id, updated_at FROM files;

-- Expiry: from expires_at on a file counts as deleted; the sweeper then
-- records the delete.
ALTER TABLE files ADD COLUMN expires_at timestamptz;
CREATE INDEX files_expiry ON files (expires_at) WHERE expires_at IS NOT NULL AND deleted_at IS NULL;
CREATE INDEX files_by_last_run ON files (subject, last_run_id, created_at DESC, id DESC) WHERE last_run_id IS NOT NULL;

-- Share links: only the SHA-256 of a link's secret is stored.
CREATE TABLE links (
    id           text PRIMARY KEY,
    subject      text NOT NULL,
    file_id      text NOT NULL REFERENCES files (id) ON DELETE CASCADE,
    version      integer,      -- NULL: always the current content
    secret_hash  bytea NOT NULL UNIQUE,
    expires_at   timestamptz NOT NULL,
    revoked_at   timestamptz,
    agent_id     text,
    run_id       text,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX links_by_file ON links (file_id, created_at DESC, id DESC);

-- Cancelled batches and items.
ALTER TABLE batches DROP CONSTRAINT batches_status_check;
ALTER TABLE batches ADD CONSTRAINT batches_status_check
    CHECK (status IN ('queued', 'running', 'succeeded', 'partially_succeeded', 'failed', 'canceled'));
ALTER TABLE batch_items DROP CONSTRAINT batch_items_status_check;
ALTER TABLE batch_items ADD CONSTRAINT batch_items_status_check
    CHECK (status IN ('pending', 'succeeded', 'failed', 'canceled'));
ALTER TABLE batch_items ADD COLUMN expires_in_seconds bigint NOT NULL DEFAULT 0;
ALTER TABLE uploads ADD COLUMN expires_in_seconds bigint NOT NULL DEFAULT 0;

-- Listing sessions and batches, newest first.
CREATE INDEX batches_by_subject ON batches (subject, created_at DESC, id DESC);
CREATE INDEX uploads_by_subject ON uploads (subject, created_at DESC, id DESC);
CREATE INDEX uploads_blob_key ON uploads (blob_key);
